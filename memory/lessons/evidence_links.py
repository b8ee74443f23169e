"""The links between a lesson and the outcomes that are its evidence (``LessonEvidence``):
written one by one as attribution makes them, or with the outcome's own row when they
are foreseen (``lesson_evidence_links_cte``), and taken back when they were foreseen
wrongly. A link moves no confidence; ``memory.lessons.evidence`` does.
"""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

from memory.lessons.lifecycle import RELATION_SUPPORTS
from memory.models import Lesson, LessonEvidence, Outcome


def lesson_evidence_attach(
    *, lesson: Lesson, outcome: Outcome, relation: str = RELATION_SUPPORTS
) -> bool:
    """Attach an outcome to a lesson row once; True when it was new.

    One ``INSERT ... ON CONFLICT DO NOTHING`` on the (lesson, outcome) unique
    constraint: safe under concurrency without a savepoint.
    """
    table = LessonEvidence._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (lesson_id, outcome_id, relation, created_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (lesson_id, outcome_id) DO NOTHING RETURNING id",
            [lesson.pk, outcome.pk, relation, timezone.now()],
        )
        return cursor.fetchone() is not None


def lesson_evidence_links_cte(*, links: list[tuple[int, str]], now) -> list[tuple[str, str, list]]:
    """``lesson_evidence_attach`` for several (lesson id, relation) pairs, as a CTE of the
    statement that inserts their outcome (``row_insert_keyed``: the outcome's new key is
    ``n.id`` there), so a harness outcome's foreseen links cost no round trip of their own.
    The outcome is new, so each link is too; the caller passes ``attached`` for them."""
    if not links:
        return []
    table = LessonEvidence._meta.db_table
    # The outcome then its links through the ORM, in a transaction: 8x (bench/results/rows.md).
    return [
        (
            "lesson_links",
            f"INSERT INTO {table} (lesson_id, outcome_id, relation, created_at) "
            "SELECT x.lesson_id, (SELECT id FROM n), x.relation, %s "
            "FROM unnest(%s::bigint[], %s::text[]) AS x(lesson_id, relation) "
            "ON CONFLICT (lesson_id, outcome_id) DO NOTHING RETURNING lesson_id",
            [now, [pk for pk, _ in links], [relation for _, relation in links]],
        )
    ]


def lesson_evidence_unlink(*, outcome: Outcome, lesson_ids: list[int]) -> None:
    """Take back links ``lesson_evidence_links_cte`` wrote that attribution did not make
    (the in-play rows changed on the way: a promotion, a demotion)."""
    LessonEvidence.objects.filter(outcome=outcome, lesson_id__in=lesson_ids).delete()
