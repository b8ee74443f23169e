"""Reads for job runs and the audit log, scoped to one workspace.

Job runs with no workspace are system-wide (the heartbeat, cross-workspace
maintenance); they carry no workspace's data, so every member may see them.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django.conf import settings
from django.db.models import Count, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from memory.models import AuditEvent, JobRun, Workspace

ACTIVE_JOB_STATUSES = (JobRun.Status.QUEUED, JobRun.Status.RUNNING)

# Kinds named in SPEC section 7, offered in filters even before they first run.
KNOWN_JOB_KINDS = (
    "consolidate",
    "decay",
    "embed_backfill",
    "erasure",
    "export",
    "heartbeat",
    "orphan",
    "prune",
    "reconcile",
)


def _job_scope(workspace: Workspace) -> Q:
    return Q(workspace=workspace) | Q(workspace__isnull=True)


# Job runs are listed newest first by id: ids and created_at are both assigned at
# insert, and walking the primary key backwards stops after one page, while
# "ORDER BY created_at" with the system-run OR sorts every matching row
# (measured: 0.03 ms vs 70 ms at 200k runs).
JOB_RUN_ORDER = ("-id",)


# The job list's status filter also offers "active": queued or running, by the rule the
# nav's and the dashboard's count uses (``job_run_active_count``), so a count and the rows
# its link shows agree.
ACTIVE = "active"


def day_start(day: date) -> datetime:
    """The first instant of ``day`` in the server's time zone (what "since" a day means)."""
    return timezone.make_aware(datetime.combine(day, time.min))


def _active_window():
    return JobRun.objects.order_by("-id").values("id")[: settings.CAIRN_UI_ACTIVE_JOB_WINDOW]


def _created_since(start: datetime) -> Q:
    # created_at has no index, but ids grow with it: the newest run older than ``start``
    # bounds a primary-key range scan, so the cost follows the window, not the table.
    before = JobRun.objects.filter(created_at__lt=start).order_by("-id").values("id")[:1]
    return Q(created_at__gte=start, id__gt=Coalesce(Subquery(before), Value(0)))


# Kinds that run every few minutes to prove the stack is alive: their successful runs
# are left out of lists unless asked for (288 heartbeats a day would bury every other
# run); a failed or stuck one is news and stays.
QUIET_JOB_KINDS = ("heartbeat",)


def _quiet_runs() -> Q:
    return Q(kind__in=QUIET_JOB_KINDS, status=JobRun.Status.SUCCEEDED)


def job_run_list(
    *,
    workspace: Workspace,
    kind: str = "",
    status: str = "",
    since: date | None = None,
    with_quiet: bool = True,
) -> QuerySet[JobRun]:
    """Runs newest first; ``status`` is one status or ``ACTIVE``; ``since`` a first day.

    ``with_quiet=False`` leaves out the successful runs of ``QUIET_JOB_KINDS`` (unless
    ``kind`` names one of them: then they are what was asked for)."""
    qs = JobRun.objects.filter(_job_scope(workspace))
    if not with_quiet and kind not in QUIET_JOB_KINDS:
        qs = qs.exclude(_quiet_runs())
    if kind:
        qs = qs.filter(kind=kind)
    if status == ACTIVE:
        qs = qs.filter(status__in=ACTIVE_JOB_STATUSES, id__in=_active_window())
    elif status:
        qs = qs.filter(status=status)
    if since is not None:
        qs = qs.filter(_created_since(day_start(since)))
    return qs.order_by(*JOB_RUN_ORDER)


def job_run_quiet_last(*, workspace: Workspace) -> JobRun | None:
    """The newest successful run of a quiet kind (what a list leaving them out says)."""
    return (
        JobRun.objects.filter(_job_scope(workspace))
        .filter(_quiet_runs())
        .order_by(*JOB_RUN_ORDER)
        .first()
    )


def job_run_get(*, workspace: Workspace, pk) -> JobRun | None:
    return JobRun.objects.filter(_job_scope(workspace), pk=pk).first()


def job_run_active_count(*, workspace: Workspace) -> int:
    """Queued or running runs among the latest ``CAIRN_UI_ACTIVE_JOB_WINDOW`` runs.

    The nav shows this on every page, so it must not scan the whole table (status
    has no index); a run still "running" thousands of runs later is stuck, and the
    job list's status filter still finds it. The job list's "active" filter shows
    exactly these runs.
    """
    return job_run_list(workspace=workspace, status=ACTIVE).order_by().count()


def job_run_kinds(*, workspace: Workspace) -> list[str]:
    """Kinds to offer as a filter: the spec's plus any seen in recent runs (bounded)."""
    recent = (
        JobRun.objects.filter(_job_scope(workspace))
        .order_by(*JOB_RUN_ORDER)
        .values_list("kind", flat=True)[: settings.CAIRN_UI_SUGGESTION_SAMPLE]
    )
    return sorted(set(KNOWN_JOB_KINDS) | set(recent))


def job_runs_per_day(
    *, workspace: Workspace, days: int | None = None, now: datetime | None = None
) -> list[dict]:
    """One row per day (oldest first, empty days included): date, succeeded, failed, other.

    The days are those ``job_run_list(since=<the first day>)`` lists, run by run."""
    days = days or settings.CAIRN_UI_CHART_DAYS
    today = timezone.localdate(now or timezone.now())
    first = today - timedelta(days=days - 1)
    rows = (
        job_run_list(workspace=workspace, since=first)
        .order_by()
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(
            total=Count("id"),
            succeeded=Count("id", filter=Q(status=JobRun.Status.SUCCEEDED)),
            failed=Count("id", filter=Q(status=JobRun.Status.FAILED)),
        )
    )
    by_day = {row["day"]: row for row in rows}
    out = []
    for offset in range(days):
        day = first + timedelta(days=offset)
        row = by_day.get(day, {"total": 0, "succeeded": 0, "failed": 0})
        out.append(
            {
                "day": day,
                "succeeded": row["succeeded"],
                "failed": row["failed"],
                "other": row["total"] - row["succeeded"] - row["failed"],
            }
        )
    return out


def audit_event_list(
    *,
    workspace: Workspace,
    action: str = "",
    actor: str = "",
    target_type: str = "",
    target_id: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[AuditEvent]:
    """Newest first. ``action`` and ``actor`` match as prefixes (``token.``, ``user:``).

    ``since`` (inclusive) and ``until`` (exclusive) bound ``created_at``.
    """
    qs = AuditEvent.objects.filter(workspace=workspace)
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    if until is not None:
        qs = qs.filter(created_at__lt=until)
    if action:
        qs = qs.filter(action__startswith=action)
    if actor:
        qs = qs.filter(actor__startswith=actor)
    if target_type:
        qs = qs.filter(target_type=target_type)
    if target_id:
        qs = qs.filter(target_id=target_id)
    return qs.order_by("-created_at", "-id")


def audit_event_actions(*, workspace: Workspace) -> list[str]:
    """Actions seen in the recent audit log, to suggest in the filter (bounded)."""
    recent = (
        AuditEvent.objects.filter(workspace=workspace)
        .order_by("-created_at")
        .values_list("action", flat=True)[: settings.CAIRN_UI_SUGGESTION_SAMPLE]
    )
    return sorted(set(recent))


def audit_event_for_targets(
    *, workspace: Workspace, target_type: str, target_ids: list[int], limit: int | None = None
) -> list[AuditEvent]:
    """What people, agents and jobs did to these rows (one lineage), newest first, bounded."""
    limit = limit or settings.CAIRN_UI_LESSON_ACTIVITY_MAX
    return list(
        AuditEvent.objects.filter(
            workspace=workspace,
            target_type=target_type,
            target_id__in=[str(pk) for pk in target_ids],
        ).order_by("-created_at", "-id")[:limit]
    )
