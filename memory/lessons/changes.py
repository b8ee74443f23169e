"""Lessons learned or retired since a day: one rule for the dashboard's numbers and the
Lessons filter they link to, so a number is the rows its link shows.

- *learned*: the current row of every lineage that was created (``lesson.create``, an
  agent's post) or learned (``lesson.learn``, the loop) since the day, as the audit log
  says; an edit or a merge since then moves the lesson to its current row, counted once.
- *retired*: current rows retired since the day and still retired (a restored lesson is
  no longer a retired one).

Both are current rows only, as the Lessons list shows.
"""

from __future__ import annotations

from datetime import date, datetime

from django.db import connection
from django.db.models import BooleanField, F, Func, Q, QuerySet
from django.db.models.expressions import RawSQL

from memory.core.selectors import day_start
from memory.models import AuditEvent, Lesson, LessonState, Workspace

LEARNED_ACTIONS = ("lesson.create", "lesson.learn")
RETIRED_ACTIONS = ("lesson.retire",)
CHANGES = ("learned", "retired")

# From each lesson the audit log says was created or learned since the day, follow
# superseded_by to the lineage's current row.
_LEARNED_HEADS_SQL = """
WITH RECURSIVE walk(id, next_id) AS (
    SELECT l.id, l.superseded_by_id FROM {lesson} l
    WHERE l.workspace_id = %s AND l.id IN (
        SELECT a.target_id::bigint FROM {audit} a
        WHERE a.workspace_id = %s AND a.created_at >= %s AND a.target_type = 'lesson'
          AND a.action = ANY(%s) AND a.target_id ~ '^[0-9]{{1,18}}$'
    )
    UNION
    SELECT l.id, l.superseded_by_id FROM {lesson} l JOIN walk w ON l.id = w.next_id
)
SELECT id FROM walk WHERE next_id IS NULL
"""


class _AmongHeads(Func):
    """``id = ANY(ARRAY(walk))``: the walk runs once, as an init plan, and its ids are
    then looked up by hash. Written as ``id IN (walk)``, the planner may re-run the
    walk for every lesson when its statistics are missing (rows just bulk-loaded, not
    yet analysed): 14 s at 10,000 lessons, against milliseconds."""

    arg_joiner = " = ANY(ARRAY"
    template = "(%(expressions)s))"
    output_field = BooleanField()


def lesson_change_q(*, workspace: Workspace, change: str, since: date | datetime) -> Q:
    """The condition on current lesson rows for ``change`` since ``since`` (a day, or an
    instant)."""
    if not isinstance(since, datetime):
        since = day_start(since)
    if change == "learned":
        sql = _LEARNED_HEADS_SQL.format(
            lesson=Lesson._meta.db_table, audit=AuditEvent._meta.db_table
        )
        heads = RawSQL(sql, (workspace.pk, workspace.pk, since, list(LEARNED_ACTIONS)))
        return Q(_AmongHeads(F("id"), heads))
    if change == "retired":
        return Q(state=LessonState.RETIRED, retired_at__gte=since)
    raise ValueError(f"unknown lesson change {change!r}")


def lessons_changed_since(*, workspace: Workspace, change: str, since: date) -> QuerySet[Lesson]:
    """Current lessons ``change``d ("learned" or "retired") since the start of ``since``."""
    return Lesson.objects.filter(
        lesson_change_q(workspace=workspace, change=change, since=since),
        workspace=workspace,
        superseded_by__isnull=True,
    )


def lesson_change_counts(*, workspace: Workspace, since: date) -> dict[str, int]:
    """How many rows each of ``lessons_changed_since``'s filters holds: one statement,
    counting the very querysets the Lessons filter shows. Each count is its own scalar
    subquery, so the lineage walk is a semi-join run once; inside an aggregate's FILTER
    it was a subplan the planner re-ran for every lesson (minutes at 10,000 rows)."""
    parts, params = [], []
    for change in CHANGES:
        sql, change_params = (
            lessons_changed_since(workspace=workspace, change=change, since=since)
            .values("id")
            .query.sql_with_params()
        )
        parts.append(f"(SELECT count(*) FROM ({sql}) AS {change}_rows) AS {change}")
        params.extend(change_params)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(parts)}", params)
        row = cursor.fetchone()
    return dict(zip(CHANGES, (int(n) for n in row), strict=True))
