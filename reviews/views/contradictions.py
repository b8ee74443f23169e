"""The contradictions queue: pairs the reconcile job could not settle on its own
(a side sealed, pinned or written by a person). A reviewer sees both sides with
their evidence and history and keeps A, B or both, or edits them into one."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from cairn.errors import ApplicationError
from memory.models import ReviewItemStatus, ReviewResolution
from memory.review.selectors import (
    REVIEW_ITEM_ORDER,
    review_item_get,
    review_item_history,
    review_item_list,
    review_item_targets,
)
from memory.review.services import review_item_resolve
from reviews.access import actor_for, require_role
from reviews.forms import ReasonForm
from reviews.htmx import redirect_back, render_action, render_page, wants_fragment
from reviews.pagination import paginate
from reviews.templatetags.cairn_ui import resolution_words

TEMPLATE = "reviews/contradictions.html"
STATUSES = [("open", "open"), ("resolved", "resolved"), ("all", "all")]


@require_role
@require_GET
def contradictions(request):
    status = request.GET.get("status", "open")
    if status not in dict(STATUSES):
        status = "open"
    queryset = review_item_list(
        workspace=request.workspace, status="" if status == "all" else status
    )
    page = paginate(request, queryset, ordering=REVIEW_ITEM_ORDER)
    review_item_targets(workspace=request.workspace, items=page.items)
    review_item_history(workspace=request.workspace, items=page.items)
    context = {
        "page": page,
        "status": status,
        "statuses": STATUSES,
        "list_url": reverse("reviews:contradictions"),
    }
    return render_page(request, TEMPLATE, context, partial="rows")


@require_role
@require_POST
def contradictions_resolve(request, pk: int, resolution: str):
    item = review_item_get(workspace=request.workspace, pk=pk)
    if item is None or resolution not in ReviewResolution.values:
        raise Http404("No such review item in this workspace.")
    form = ReasonForm(request.POST)
    error = ""
    if not form.is_valid():
        error = form.first_error()
    elif item.status == ReviewItemStatus.RESOLVED:
        messages.info(request, f"Item {item.pk} was already resolved.")
    else:
        try:
            item = review_item_resolve(
                item=item,
                resolution=resolution,
                actor=actor_for(request),
                reason=form.cleaned_data["reason"],
                text=request.POST.get("text", ""),
            )
            messages.success(
                request, f"Item {item.pk} resolved: {resolution_words(resolution, item)}."
            )
        except ApplicationError as exc:
            error = exc.message
    if not wants_fragment(request):
        if error:
            messages.error(request, error)
        return redirect_back("reviews:contradictions")
    review_item_targets(workspace=request.workspace, items=[item])
    review_item_history(workspace=request.workspace, items=[item])
    context = {"item": item, "errors": {resolution: error} if error else {}}
    return render_action(request, f"{TEMPLATE}#item", context, status=422 if error else 200)
