"""The audit log: who changed what, when and why (never the content itself)."""

from __future__ import annotations

from django.urls import reverse
from django.views.decorators.http import require_GET

from memory.core.selectors import audit_event_actions, audit_event_list
from reviews.access import require_role
from reviews.htmx import render_page
from reviews.pagination import paginate

FILTERS = {"action": 64, "actor": 200, "target_type": 64, "target_id": 64}


@require_role("viewer")
@require_GET
def audit(request):
    filters = {name: request.GET.get(name, "").strip()[:cap] for name, cap in FILTERS.items()}
    queryset = audit_event_list(workspace=request.workspace, **filters)
    workspace = request.workspace
    context = {
        **filters,
        "page": paginate(request, queryset, ordering=("-created_at", "-id")),
        "filtered": any(filters.values()),
        # A callable: the template calls it only when it renders the filters (full page).
        "actions": lambda: audit_event_actions(workspace=workspace),
        "list_url": reverse("reviews:audit"),
    }
    return render_page(request, "reviews/audit.html", context, partial="rows")
