"""Project labels: a person's name for a project digest, shown wherever the digest is."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from cairn.errors import ApplicationError
from memory.identity.projects import project_label_set
from memory.identity.selectors import project_labels
from reviews.access import actor_for, require_role
from reviews.htmx import render_action, wants_fragment


@require_role
@require_POST
def projects_label(request, digest: str):
    typed = request.POST.get("label", "")
    error = ""
    try:
        label = project_label_set(
            workspace=request.workspace,
            project_digest=digest,
            label=typed,
            actor=actor_for(request),
        )
    except ApplicationError as exc:
        error = exc.message
        label = project_labels(workspace=request.workspace, digests=[digest]).get(digest, "")
    if wants_fragment(request):
        context = {
            "digest": digest,
            "label": label,
            "label_input": typed if error else label,
            "label_error": error,
            "editable": True,
        }
        return render_action(
            request, "reviews/_project.html", context, status=422 if error else 200
        )
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Project named “{label}”." if label else "Project name removed.")
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = "reviews:lessons"
    response = redirect(back)
    response.status_code = 303
    return response
