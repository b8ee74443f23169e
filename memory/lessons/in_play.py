"""What a harness outcome had in play, read for attribution: its lessons and knowledge
items, each in one prepared query, locked when evidence will be applied to them and
unlocked when ``memory.lessons.outcomes`` only asks whether anything will be written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memory.core.rows import PreparedQuery
from memory.lessons.promotion import promotion_twins_exist
from memory.lessons.self_report import in_play_ids
from memory.models import Channel, Knowledge, KnowledgeStatus, Lesson, Outcome


def _in_play_lessons(*, locked: bool):
    def build(workspace_id, ids):
        rows = Lesson.objects.filter(workspace_id=workspace_id, pk__any=ids)
        if locked:
            rows = rows.select_for_update(no_key=True, of=("self",))
        return rows.annotate(twins=promotion_twins_exist()).order_by("pk")

    return PreparedQuery(build, ints=("workspace_id",), lists=("ids",))


def _in_play_knowledge():
    def build(workspace_id, ids):
        return (
            Knowledge.objects.filter(
                workspace_id=workspace_id,
                pk__any=ids,
                status=KnowledgeStatus.ACTIVE,
                superseded_by__isnull=True,
            )
            .select_for_update(no_key=True, of=("self",))
            .order_by("id")
        )

    return PreparedQuery(build, ints=("workspace_id",), lists=("ids",))


# What a harness outcome had in play, read once per outcome: compiled once per process
# (the ORM building and compiling the same locked read each time: 11x, bench/results/rows.md).
_LESSONS, _LESSONS_LOCKED = _in_play_lessons(locked=False), _in_play_lessons(locked=True)
_KNOWLEDGE_LOCKED = _in_play_knowledge()


@dataclass
class InPlay:
    """The in-play rows an outcome is attributed to: lessons newest first, knowledge
    items in id order."""

    lessons: list[Lesson] = field(default_factory=list)
    items: list[Knowledge] = field(default_factory=list)


def in_play_read(*, outcome: Outcome, locked: bool = True) -> InPlay:
    """A harness outcome's in-play lessons and knowledge items, each read in one query.

    ``locked`` (``FOR NO KEY UPDATE``, in id order, lessons before knowledge items: it
    does not block other transactions' evidence links to the same rows): applying
    evidence then needs no second read. Unlocked, for ``_quiet`` to tell whether
    anything will be written to them at all.

    Nothing is read for an agent token's outcome: it moves nothing but recency, which
    its ``InPlayReport`` marks after the commit (memory.lessons.self_report). Nor for
    an outcome without a verdict: it is attributed to nothing.
    """
    if outcome.passed is None or outcome.channel != Channel.HARNESS:
        return InPlay()
    ids = in_play_ids(outcome.in_play)
    lesson_ids, knowledge_ids = sorted(ids[Lesson]), sorted(ids[Knowledge])
    rows = InPlay()
    if lesson_ids:
        read = _LESSONS_LOCKED if locked else _LESSONS
        rows.lessons = read.rows(workspace_id=outcome.workspace_id, ids=lesson_ids)
        rows.lessons.sort(key=lambda row: (row.created_at, row.pk), reverse=True)
    if knowledge_ids:
        rows.items = _KNOWLEDGE_LOCKED.rows(workspace_id=outcome.workspace_id, ids=knowledge_ids)
    return rows
