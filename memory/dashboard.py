"""Cross-domain reads for the dashboard: counts, queues and trends."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count, Exists, F, Func, IntegerField, Q, Value
from django.db.models.functions import Least, TruncDate
from django.utils import timezone

from memory.core.selectors import day_start, job_run_list
from memory.lessons.changes import LEARNED_ACTIONS, RETIRED_ACTIONS, lesson_change_counts
from memory.models import (
    Agent,
    ApiToken,
    AuditEvent,
    ConfidenceChange,
    Knowledge,
    KnowledgeStatus,
    Lesson,
    LessonState,
    Outcome,
    SkillDelta,
    Workspace,
)


def dashboard_counts(*, workspace: Workspace) -> dict:
    """Counts for the dashboard; later issues add their queues here."""
    return {
        "agents": Agent.objects.filter(workspace=workspace).count(),
        "active_tokens": ApiToken.objects.filter(
            workspace=workspace, revoked_at__isnull=True
        ).count(),
        # Newest by id: the primary key index stops after five rows (see JOB_RUN_ORDER);
        # successful heartbeats left out, as on Job runs, or they would be all five.
        "recent_jobs": list(job_run_list(workspace=workspace, with_quiet=False)[:5]),
    }


def first_steps(*, workspace: Workspace) -> dict[str, bool]:
    """A new workspace's first hour, each step ticked by what happened, not by a click:
    an agent remembered something, its harness posted an outcome, a lesson was learned,
    and a lesson gained weight from outside (a harness outcome or a person). One query."""
    lesson_raised = ConfidenceChange.objects.filter(
        workspace=workspace,
        target_type="lesson",
        channel__in=("harness", "person"),
        after__gt=F("before"),
    )
    row = Workspace.objects.filter(pk=workspace.pk).aggregate(
        remembered=Count("pk", filter=Q(Exists(Knowledge.objects.filter(workspace=workspace)))),
        outcome=Count("pk", filter=Q(Exists(Outcome.objects.filter(workspace=workspace)))),
        lesson=Count("pk", filter=Q(Exists(Lesson.objects.filter(workspace=workspace)))),
        confirmed=Count("pk", filter=Q(Exists(lesson_raised))),
    )
    return {key: bool(value) for key, value in row.items()}


# --- "what needs me, and is memory healthy?" ------------------------------------------------


def _window_start(*, days: int, now: datetime | None) -> tuple[date, datetime]:
    today = timezone.localdate(now or timezone.now())
    first = today - timedelta(days=days - 1)
    return first, day_start(first)


# A person's first action on a lesson or a delta is their decision about it.
_DECISION_SQL = """
WITH decisions AS (
    SELECT target_type,
           CASE WHEN target_id ~ '^[0-9]{{1,18}}$' THEN target_id::bigint END AS tid,
           MIN(created_at) AS decided_at
    FROM {audit}
    WHERE workspace_id = %(ws)s AND created_at >= %(start)s AND actor LIKE 'user:%%'
      AND target_type IN ('lesson', 'skill_delta')
    GROUP BY target_type, target_id
)
SELECT percentile_cont(0.5) WITHIN GROUP (
           ORDER BY EXTRACT(EPOCH FROM d.decided_at - COALESCE(l.created_at, s.created_at))
       ),
       COUNT(*)
FROM decisions d
LEFT JOIN {lesson} l
       ON d.target_type = 'lesson' AND l.id = d.tid AND l.workspace_id = %(ws)s
LEFT JOIN {delta} s
       ON d.target_type = 'skill_delta' AND s.id = d.tid AND s.workspace_id = %(ws)s
WHERE COALESCE(l.created_at, s.created_at) IS NOT NULL
"""


def review_latency(
    *, workspace: Workspace, days: int | None = None, now: datetime | None = None
) -> dict:
    """Median seconds from a lesson's or delta's creation to a person's first decision on
    it, over the decisions of the last ``days`` days (from the audit log): ``{median_s, n}``."""
    days = days or settings.CAIRN_UI_TREND_DAYS
    _first, start = _window_start(days=days, now=now)
    sql = _DECISION_SQL.format(
        audit=AuditEvent._meta.db_table,
        lesson=Lesson._meta.db_table,
        delta=SkillDelta._meta.db_table,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"ws": workspace.pk, "start": start})
        median, n = cursor.fetchone()
    return {"median_s": None if median is None else float(median), "n": n, "days": days}


def lesson_changes(
    *, workspace: Workspace, days: int | None = None, now: datetime | None = None
) -> dict:
    """Lessons learned and retired over the trend window, by the rule the Lessons list's
    "changed since" filter applies (``memory.lessons.changes``): ``{learned, retired, since}``."""
    days = days or settings.CAIRN_UI_TREND_DAYS
    first, _start = _window_start(days=days, now=now)
    return {**lesson_change_counts(workspace=workspace, since=first), "since": first}


def lessons_per_day(
    *, workspace: Workspace, days: int | None = None, now: datetime | None = None
) -> list[dict]:
    """Lesson events (learned, retired) per day (oldest first, empty days included), from
    the audit log: one aggregate over the window's events. The chart's trend; the
    dashboard's numbers are ``lesson_changes`` (lessons, not events)."""
    days = days or settings.CAIRN_UI_TREND_DAYS
    first, start = _window_start(days=days, now=now)
    rows = (
        AuditEvent.objects.filter(
            workspace=workspace,
            created_at__gte=start,
            action__in=LEARNED_ACTIONS + RETIRED_ACTIONS,
        )
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(
            learned=Count("id", filter=Q(action__in=LEARNED_ACTIONS)),
            retired=Count("id", filter=Q(action__in=RETIRED_ACTIONS)),
        )
        .order_by()
    )
    by_day = {row["day"]: row for row in rows}
    out = []
    for offset in range(days):
        day = first + timedelta(days=offset)
        row = by_day.get(day, {})
        out.append({"day": day, "learned": row.get("learned", 0), "retired": row.get("retired", 0)})
    return out


def _histogram(queryset, bins: int) -> list[int]:
    rows = (
        queryset.annotate(
            bin=Least(
                Func(
                    F("confidence"),
                    Value(0.0),
                    Value(1.0),
                    Value(bins),
                    function="width_bucket",
                    output_field=IntegerField(),
                ),
                Value(bins),
            )
        )
        .values("bin")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts = [0] * bins
    for row in rows:
        counts[max(1, row["bin"]) - 1] += row["n"]
    return counts


def confidence_histograms(*, workspace: Workspace) -> dict:
    """Active lessons' confidence and active knowledge strength, in equal bins (two queries)."""
    bins = settings.CAIRN_UI_CONFIDENCE_BINS
    return {
        "bins": bins,
        "lessons": _histogram(
            Lesson.objects.filter(
                workspace=workspace, superseded_by__isnull=True, state=LessonState.ACTIVE
            ),
            bins,
        ),
        "knowledge": _histogram(
            Knowledge.objects.filter(
                workspace=workspace, superseded_by__isnull=True, status=KnowledgeStatus.ACTIVE
            ),
            bins,
        ),
    }


_LESSON_HEALTH_SQL = """
SELECT
    (SELECT COUNT(*) FROM {lesson}
      WHERE workspace_id = %(ws)s AND superseded_by_id IS NULL AND state = 'claimed'),
    COALESCE(SUM(g.n), 0),
    COUNT(g.n)
FROM (
    SELECT COUNT(*) AS n FROM {lesson}
    WHERE workspace_id = %(ws)s AND superseded_by_id IS NULL AND state <> 'retired'
    GROUP BY operation_key, normalized_text
    HAVING COUNT(*) > 1
) g
"""


def lesson_health_counts(*, workspace: Workspace) -> dict:
    """Claimed lessons still waiting for a first confirmation, and live lessons that say
    the same thing as another live one (same operation, equivalent text): one query."""
    with connection.cursor() as cursor:
        cursor.execute(
            _LESSON_HEALTH_SQL.format(lesson=Lesson._meta.db_table), {"ws": workspace.pk}
        )
        claimed, duplicates, groups = cursor.fetchone()
    return {"claimed": claimed, "duplicates": int(duplicates), "duplicate_groups": groups}
