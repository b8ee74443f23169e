"""Job runs: every background run with its status, progress, counts and errors."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET

from cairn.health import check_workers
from memory.core.selectors import (
    ACTIVE_JOB_STATUSES,
    JOB_RUN_ORDER,
    job_run_get,
    job_run_kinds,
    job_run_list,
)
from memory.models import JobRun
from reviews.access import require_role
from reviews.htmx import render_page, wants_fragment
from reviews.pagination import paginate


def _common() -> dict:
    return {"active_statuses": ACTIVE_JOB_STATUSES, "poll_s": settings.CAIRN_UI_JOB_POLL_S}


def _workers_answering() -> int:
    count, _ = check_workers()
    return count


@require_role("viewer")
@require_GET
def jobs(request):
    kind = request.GET.get("kind", "").strip()[:64]
    status = request.GET.get("status", "")
    if status not in JobRun.Status.values:
        status = ""
    queryset = job_run_list(workspace=request.workspace, kind=kind, status=status)
    workspace = request.workspace
    page = paginate(request, queryset, ordering=JOB_RUN_ORDER)
    context = {
        **_common(),
        "page": page,
        # Nothing ran yet: ask the workers (one ping, only in this rare case) so the
        # empty state says whether they are up instead of guessing.
        "workers": None if page.items or kind or status else _workers_answering(),
        "kind": kind,
        "status": status,
        "filtered": bool(kind or status),
        # A callable: the template calls it only when it renders the filters (full page).
        "kinds": lambda: job_run_kinds(workspace=workspace),
        "statuses": JobRun.Status.choices,
        "list_url": reverse("reviews:jobs"),
    }
    return render_page(request, "reviews/jobs.html", context, partial="rows")


@require_role("viewer")
@require_GET
def jobs_detail(request, pk: int):
    """The run's page; for htmx, the fragment the poller asked for (its row or the detail card)."""
    run = job_run_get(workspace=request.workspace, pk=pk)
    if run is None:
        raise Http404("No such job run in this workspace.")
    context = {**_common(), "run": run}
    if wants_fragment(request) and request.htmx.target != "job-detail":
        response = render_page(request, "reviews/jobs.html", context, partial="job_row")
    else:
        response = render_page(request, "reviews/job_detail.html", context, partial="detail")
    patch_vary_headers(response, ["HX-Target"])  # the fragment depends on who asks
    return response
