"""Reads for job runs and the audit log, scoped to one workspace.

Job runs with no workspace are system-wide (the heartbeat, cross-workspace
maintenance); they carry no workspace's data, so every member may see them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncDate
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


def job_run_list(*, workspace: Workspace, kind: str = "", status: str = "") -> QuerySet[JobRun]:
    qs = JobRun.objects.filter(_job_scope(workspace))
    if kind:
        qs = qs.filter(kind=kind)
    if status:
        qs = qs.filter(status=status)
    return qs.order_by("-created_at", "-id")


def job_run_get(*, workspace: Workspace, pk) -> JobRun | None:
    return JobRun.objects.filter(_job_scope(workspace), pk=pk).first()


def job_run_active_count(*, workspace: Workspace) -> int:
    return JobRun.objects.filter(_job_scope(workspace), status__in=ACTIVE_JOB_STATUSES).count()


def job_run_kinds(*, workspace: Workspace) -> list[str]:
    """Kinds to offer as a filter: the spec's plus any seen in recent runs (bounded)."""
    recent = (
        JobRun.objects.filter(_job_scope(workspace))
        .order_by("-created_at")
        .values_list("kind", flat=True)[: settings.CAIRN_UI_SUGGESTION_SAMPLE]
    )
    return sorted(set(KNOWN_JOB_KINDS) | set(recent))


def job_runs_per_day(
    *, workspace: Workspace, days: int | None = None, now: datetime | None = None
) -> list[dict]:
    """One row per day (oldest first, empty days included): date, succeeded, failed, other."""
    days = days or settings.CAIRN_UI_CHART_DAYS
    today = timezone.localdate(now or timezone.now())
    first = today - timedelta(days=days - 1)
    start = timezone.make_aware(datetime.combine(first, datetime.min.time()))
    rows = (
        JobRun.objects.filter(_job_scope(workspace), created_at__gte=start)
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
) -> QuerySet[AuditEvent]:
    """Newest first. ``action`` and ``actor`` match as prefixes (``token.``, ``user:``)."""
    qs = AuditEvent.objects.filter(workspace=workspace)
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
