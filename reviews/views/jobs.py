"""Job runs: every background run with its status, progress, counts and errors."""

from __future__ import annotations

from datetime import date

from django.conf import settings
from django.contrib import messages
from django.http import Http404
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from cairn.health import check_workers
from memory.core.schedule import job_schedule
from memory.core.selectors import (
    ACTIVE,
    ACTIVE_JOB_STATUSES,
    JOB_RUN_ORDER,
    QUIET_JOB_KINDS,
    job_run_get,
    job_run_kinds,
    job_run_list,
    job_run_quiet_last,
)
from memory.maintenance.runnow import RUNNABLE_JOBS, job_run_now
from memory.models import JobRun, Role
from reviews.access import WORKSPACE_PARAM, actor_for, require_role
from reviews.htmx import redirect_back, render_page, wants_fragment
from reviews.pagination import paginate
from reviews.toasts import job_toast, poll_membership, toast_ended, toast_gone, toast_unchanged

# What each "Run now" button does, in the words of a person deciding whether to press it.
JOB_DESCRIPTIONS = {
    "reconcile": "Find near-duplicate and conflicting lessons and knowledge; duplicates "
    "merge, conflicts go to Contradictions for a person.",
    "consolidate": "Sum up sessions idle for two weeks into notes and extracted items, and "
    "merge near-duplicate lessons.",
    "decay": "Lower the strength of what has not been used for a while; very weak lessons "
    "retire and long-idle knowledge is archived (restorable). Pinned items are exempt.",
    "maintenance": "Keep each agent within its lesson caps, retiring the weakest beyond them.",
    "prune": "Delete raw conversation turns and tool calls older than the retention period, "
    "for good. Lessons and knowledge learned from them stay.",
    "embed_backfill": "Compute missing embeddings (after a model change or an outage) so "
    "search and recall see every item.",
    "skills.budget": "Move the least-used learned skill lines to retrieval-only when an "
    "agent's resident budget is full, and back when it fits again.",
    "skills.consolidate": "Propose one umbrella delta over near-identical learned lines; it "
    "waits in Staged for a reviewer.",
}
# Jobs that delete data for good: the button asks for a confirmation first.
DESTRUCTIVE_JOBS = {"prune"}


def _common() -> dict:
    return {"active_statuses": ACTIVE_JOB_STATUSES, "poll_s": settings.CAIRN_UI_JOB_POLL_S}


def _workers_answering() -> int:
    count, _ = check_workers()
    return count


def _list_context(
    request,
    *,
    kind: str = "",
    status: str = "",
    since: date | None = None,
    heartbeats: bool = False,
) -> dict:
    workspace = request.workspace
    queryset = job_run_list(
        workspace=workspace, kind=kind, status=status, since=since, with_quiet=heartbeats
    )
    page = paginate(request, queryset, ordering=JOB_RUN_ORDER)
    # Successful heartbeats (every few minutes) are left out unless asked for; the list
    # says so, with the newest one, so a live stack still shows that it is live.
    hides_quiet = not heartbeats and kind not in QUIET_JOB_KINDS
    return {
        **_common(),
        "page": page,
        "heartbeats": heartbeats,
        "quiet_last": (lambda: job_run_quiet_last(workspace=workspace)) if hides_quiet else None,
        # A callable: beat's schedule is read only when the full page renders it.
        "schedule": job_schedule,
        # Nothing ran yet: ask the workers (one ping, only in this rare case) so the
        # empty state says whether they are up instead of guessing.
        "workers": None
        if page.items or kind or status or since or heartbeats
        else _workers_answering(),
        "kind": kind,
        "status": status,
        "since": since.isoformat() if since else "",
        "filtered": bool(kind or status or since or heartbeats),
        # A callable: the template calls it only when it renders the filters (full page).
        "kinds": lambda: job_run_kinds(workspace=workspace),
        "statuses": [(ACTIVE, "queued or running"), *JobRun.Status.choices],
        "list_url": reverse("reviews:jobs"),
        "heartbeats_url": reverse("reviews:jobs")
        + "?"
        + urlencode(
            {
                **{k: v for k, v in (("kind", kind), ("status", status)) if v},
                **({"since": since.isoformat()} if since else {}),
                "heartbeats": "shown",
            }
        ),
        # Admins may start any job now; the buttons are not shown to others.
        "runnable": [
            {
                "kind": job.kind,
                "label": job.label,
                "description": JOB_DESCRIPTIONS.get(job.kind, ""),
                "destructive": job.kind in DESTRUCTIVE_JOBS,
            }
            for job in RUNNABLE_JOBS.values()
        ]
        if request.membership.allows(Role.ADMIN)
        else (),
    }


@require_role
@require_GET
def jobs(request):
    kind = request.GET.get("kind", "").strip()[:64]
    status = request.GET.get("status", "")
    if status not in (ACTIVE, *JobRun.Status.values):
        status = ""
    try:
        since = date.fromisoformat(request.GET.get("since", "")[:10])
    except ValueError:
        since = None
    heartbeats = request.GET.get("heartbeats") == "shown"
    context = _list_context(request, kind=kind, status=status, since=since, heartbeats=heartbeats)
    return render_page(request, "reviews/jobs.html", context, partial="rows")


@require_role
@require_POST
def jobs_run(request, kind: str):
    """An admin's "Run now": queue the job (one queued run per kind) and show it."""
    if kind not in RUNNABLE_JOBS:
        raise Http404("No such job kind.")
    if kind in DESTRUCTIVE_JOBS and request.POST.get("confirm") != "yes":
        messages.error(
            request, f"{RUNNABLE_JOBS[kind].label} deletes data for good: tick the confirmation."
        )
        if not wants_fragment(request):
            return redirect_back("reviews:jobs")
        return render_page(request, "reviews/jobs.html", _list_context(request), partial="rows")
    run, created = job_run_now(kind=kind, workspace=request.workspace, actor=actor_for(request))
    if created:
        job_toast(request, run, f"{kind} queued as run #{run.pk}.")
    else:
        job_toast(request, run, f"{kind} is already queued as run #{run.pk}.", level=messages.INFO)
    if not wants_fragment(request):
        return redirect_back("reviews:jobs")
    return render_page(request, "reviews/jobs.html", _list_context(request), partial="rows")


# How a followed toast ends, per final status: (toast level, words).
TOAST_ENDINGS = {
    JobRun.Status.SUCCEEDED: ("success", "finished"),
    JobRun.Status.FAILED: ("error", "failed"),
    JobRun.Status.SKIPPED: ("info", "was skipped: another run of it held the lock"),
    JobRun.Status.INTERRUPTED: ("error", "was interrupted: its worker stopped"),
}


@require_GET
def jobs_toast(request, pk: int):
    """A followed toast's poll (``reviews.toasts``): no change while the run is queued or
    running, then what happened, with a link to the run."""
    membership = poll_membership(request)
    if membership is None:
        return toast_unchanged()
    run = job_run_get(workspace=membership.workspace, pk=pk)
    if run is None:
        return toast_gone()
    if run.status in ACTIVE_JOB_STATUSES:
        return toast_unchanged()
    level, words = TOAST_ENDINGS.get(run.status, ("info", run.status))
    link = reverse("reviews:jobs_detail", args=[run.pk])
    return toast_ended(
        request,
        level=level,
        text=f"{run.kind} run #{run.pk} {words}.",
        detail=run.error,
        link=f"{link}?{urlencode({WORKSPACE_PARAM: membership.workspace.name})}",
        link_text="See the run",
    )


@require_role
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
