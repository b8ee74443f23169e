"""One search box (in the header) across lessons, knowledge, deltas and outcomes."""

from __future__ import annotations

from django.views.decorators.http import require_GET

from memory.review.search import workspace_search
from reviews.access import require_role
from reviews.htmx import render_page


@require_role
@require_GET
def search(request):
    found = workspace_search(workspace=request.workspace, q=request.GET.get("q", ""))
    return render_page(request, "reviews/search.html", {"found": found}, partial="results")
