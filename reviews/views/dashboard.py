from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from memory.selectors.dashboard import dashboard_counts
from memory.services.identity import membership_get
from reviews.access import SESSION_KEY, current_membership, require_role


@login_required
def home(request):
    if current_membership(request) is None:
        return render(request, "reviews/no_workspace.html", status=403)
    return redirect("reviews:dashboard")


@require_role("viewer")
def dashboard(request):
    context = {
        "counts": dashboard_counts(workspace=request.workspace),
        "site_url": settings.SITE_URL,
    }
    return render(request, "reviews/dashboard.html", context)


@login_required
@require_POST
def switch_workspace(request):
    try:
        workspace_id = int(request.POST.get("workspace", ""))
    except ValueError:
        return HttpResponseBadRequest("workspace must be an id")
    if membership_get(user=request.user, workspace_id=workspace_id) is None:
        return HttpResponseBadRequest("not a member of that workspace")
    request.session[SESSION_KEY] = workspace_id
    return redirect("reviews:dashboard")
