"""What an outcome says about what it had in play, and an agent token's outcome's
report of it.

``lesson_effect`` and ``knowledge_effect`` are the attribution rules (SPEC section 4:
only what was in play, only on its own operation), used by ``outcome_record`` for a
harness outcome's weighted evidence and by ``InPlayReport`` for an agent token's.

An agent token's outcome (the model's own word) moves nothing but recency, so it does
not read its in-play rows on the request path: ``InPlayReport`` goes to the recency
writer (memory.lessons.recency), which reads the rows of every report gathered since
in one query a model and asks each report which rows it marks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memory.lessons.selectors import lesson_head
from memory.models import (
    Category,
    EvidenceKind,
    Knowledge,
    KnowledgeStatus,
    Lesson,
    LessonScope,
    LessonState,
    Outcome,
    StepOutcome,
)


def lesson_effect(*, lesson: Lesson, outcome: Outcome, last: dict[str, str]) -> str | None:
    """What an outcome says about a live in-play lesson: "confirms", "contradicts" or None.

    Another project's lesson is neither credited nor blamed here; otherwise a passed
    outcome whose run of the lesson's operation ended ok confirms it, and one whose run
    failed contradicts it: a failed outcome, or a passed one rescued by another approach
    after the lesson's operation failed on the lesson's target (SPEC section 4).
    """
    if lesson.scope == LessonScope.PROJECT and lesson.project_digest != outcome.project_digest:
        return None
    op_result = last.get(lesson.operation_key)
    if outcome.passed is True and op_result == StepOutcome.OK:
        return "confirms"
    if outcome.passed is False and op_result == StepOutcome.FAILED:
        return "contradicts"
    if outcome.passed is True and op_result == StepOutcome.FAILED:
        # Rescued by another approach: the lesson's own operation failed on its target
        # and the turn passed without it, the clearest sign the world changed.
        if _failed_on_target(lesson=lesson, approach=outcome.approach):
            return "contradicts"
    return None


def _failed_on_target(*, lesson: Lesson, approach: list[dict]) -> bool:
    target = lesson.target or ""
    return any(
        step["operation_key"] == lesson.operation_key
        and step["outcome"] == StepOutcome.FAILED
        and (not target or (step.get("target") or "") == target)
        for step in approach
    )


def knowledge_effect(*, item: Knowledge, passed: bool | None, last: dict[str, str]) -> str | None:
    """What an outcome says about an in-play knowledge item (None: nothing).

    - An error item warns that its operation fails. In a passed outcome it is
      confirmed when that operation failed again and contradicted when it
      worked; a failed outcome says nothing about it.
    - Other items with an operation are treated like lessons: confirmed by a
      passed outcome where the operation worked, contradicted by a failed one
      where it failed.
    - Items without an operation are neither confirmed nor contradicted by an
      outcome: a passing test says nothing about a fact that was only in the prompt
      (it would let any text the agent stored earn strength from unrelated work).
      Facts gain strength from a person's confirmation or an accepted diff.
    """
    op_result = last.get(item.operation_key) if item.operation_key else None
    if item.category == Category.ERROR and item.operation_key:
        if passed is True and op_result == StepOutcome.FAILED:
            return EvidenceKind.TEST_PASSED
        if passed is True and op_result == StepOutcome.OK:
            return EvidenceKind.CONTRADICTION
        return None
    if item.operation_key:
        if passed is True and op_result == StepOutcome.OK:
            return EvidenceKind.TEST_PASSED
        if passed is False and op_result == StepOutcome.FAILED:
            return EvidenceKind.CONTRADICTION
        return None
    return None


def in_play_ids(in_play: list[dict]) -> dict[type, set[int]]:
    """The lessons and knowledge items (errors included) among an outcome's in-play refs."""
    return {
        Lesson: {r["id"] for r in in_play if r["type"] == "lesson"},
        Knowledge: {r["id"] for r in in_play if r["type"] in ("knowledge", "error")},
    }


@dataclass(frozen=True)
class InPlayReport:
    """An agent token's outcome's in-play lessons and knowledge items, marked (one use,
    at ``at``) where the outcome speaks of them: each lesson's current version unless
    retired, each active item, in the outcome's workspace, on its own operation."""

    outcome: Outcome
    at: datetime
    last: dict[str, str]  # operations_last_result(outcome.approach)
    wanted: dict[type, set[int]]  # in_play_ids(outcome.in_play): the rows to read

    def marks(self, rows: dict[type, dict]) -> dict[type, set[int]]:
        if self.outcome.passed is None:
            return {}
        wanted, mine = self.wanted, self.outcome.workspace_id
        lessons, items = rows.get(Lesson, {}), rows.get(Knowledge, {})
        marked: dict[type, set[int]] = {Lesson: set(), Knowledge: set()}
        for pk in wanted[Lesson]:
            lesson = lessons.get(pk)
            if lesson is None or lesson.workspace_id != mine:
                continue
            lesson = lesson_head(lesson=lesson)
            if lesson.state == LessonState.RETIRED:
                continue
            if lesson_effect(lesson=lesson, outcome=self.outcome, last=self.last) is not None:
                marked[Lesson].add(lesson.pk)
        for pk in wanted[Knowledge]:
            item = items.get(pk)
            if (
                item is None
                or item.workspace_id != mine
                or item.status != KnowledgeStatus.ACTIVE
                or item.superseded_by_id is not None
            ):
                continue
            # A fact without an operation is not evidence-bearing (``knowledge_effect``),
            # but the agent says it used it in a turn that passed: recency, as before.
            used = not item.operation_key and self.outcome.passed is True
            if used or knowledge_effect(item=item, passed=self.outcome.passed, last=self.last):
                marked[Knowledge].add(item.pk)
        return marked
