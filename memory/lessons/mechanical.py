"""Mechanical lessons: what the loop learns by itself (SPEC section 4). A failed
``(A, T)`` then an ok ``(B, T)`` in a passed outcome writes "Prefer B over A for T.",
active when the harness reported the outcome, claimed when an agent token did; it
supersedes the lesson that said the reverse.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from memory.core.audit import audit_record
from memory.core.trust import birth_of
from memory.lessons.attribution import lesson_confirm_by_outcome
from memory.lessons.evidence_links import lesson_evidence_attach
from memory.lessons.lifecycle import (
    MECHANICAL_TEXT_MAX_CHARS,
    current_equivalent,
    lesson_supersede,
    lesson_text_normalize,
    retired_by_person_blocking,
)
from memory.lessons.promotion import lesson_promote_if_confirmed
from memory.lessons.selectors import lesson_head
from memory.models import (
    Channel,
    Lesson,
    LessonScope,
    LessonSource,
    LessonState,
    Outcome,
    SupersedeReason,
)


def mechanical_text(*, failed_op: str, ok_op: str, target: str) -> str:
    return f"Prefer {ok_op} over {failed_op} for {target}."


@transaction.atomic(savepoint=False)
def lesson_learn_mechanical(
    *, outcome: Outcome, failed_op: str, ok_op: str, target: str, now=None
) -> tuple[Lesson, str] | None:
    """Learn "Prefer B over A for T." from a passed outcome; returns (lesson, what happened).

    ``what`` is ``created`` or ``confirmed`` (an equivalent lesson existed),
    ``claimed`` (learned from an agent token's outcome: stored as a claim, never
    served until a harness-reported outcome confirms it) or ``self_report`` (an
    agent token's outcome met an equivalent lesson: recency only, for the caller
    to write after its commit, as ``outcome_record`` does), or None when
    nothing was learned (not passed, too long, or retired by a person on this
    same outcome). A concurrent twin loses on the one-live-lesson constraint and
    confirms the winner instead.
    """
    if outcome.passed is not True:
        return None
    now = now or timezone.now()
    text = mechanical_text(failed_op=failed_op, ok_op=ok_op, target=target)
    if len(text) > MECHANICAL_TEXT_MAX_CHARS:
        return None
    workspace = outcome.workspace
    normalized = lesson_text_normalize(text)
    if retired_by_person_blocking(
        workspace=workspace,
        operation_key=ok_op,
        normalized_text=normalized,
        outcome_ids=[outcome.pk],
    ):
        return None
    existing = current_equivalent(
        workspace=workspace,
        operation_key=ok_op,
        normalized_text=normalized,
        project_digest=outcome.project_digest,
    )
    if existing is not None:
        return _learned_again(existing=existing, outcome=outcome, now=now)
    # The outcome passed (checked above); it counts when the harness reported it.
    state, confidence = birth_of(channel=outcome.channel, verified=True)
    try:
        with transaction.atomic():
            lesson = Lesson.objects.create(
                workspace=workspace,
                agent=outcome.agent,
                text=text,
                normalized_text=normalized,
                operation_key=ok_op,
                avoid_operation_key=failed_op,
                target=target,
                scope=LessonScope.PROJECT,
                project_digest=outcome.project_digest,
                confidence=confidence,
                birth_confidence=confidence,
                state=state,
                source=LessonSource.LOOP,
                channel=outcome.channel,
            )
    except IntegrityError:
        existing = current_equivalent(
            workspace=workspace,
            operation_key=ok_op,
            normalized_text=normalized,
            project_digest=outcome.project_digest,
        )
        if existing is None:  # pragma: no cover - another constraint failed
            raise
        return _learned_again(existing=existing, outcome=outcome, now=now)
    if state == LessonState.ACTIVE:
        lesson_evidence_attach(lesson=lesson, outcome=outcome)
    audit_record(
        workspace=workspace,
        actor="system:outcomes",
        action="lesson.learn",
        target_type="lesson",
        target_id=lesson.pk,
        details={"outcome": outcome.pk, "source": LessonSource.LOOP, "channel": outcome.channel},
    )
    if state == LessonState.CLAIMED:
        return lesson, "claimed"
    _reverse_inverse(lesson=lesson, outcome=outcome, now=now)
    promoted = lesson_promote_if_confirmed(lesson=lesson, now=now)
    return (promoted or lesson), "created"


def _learned_again(*, existing: Lesson, outcome: Outcome, now) -> tuple[Lesson, str]:
    if outcome.channel != Channel.HARNESS:
        # The model's own word: recency only, which the caller marks after its commit
        # (memory.lessons.recency), so this transaction takes no lock on the row.
        return lesson_head(lesson=existing), "self_report"
    holder = lesson_confirm_by_outcome(lesson=existing, outcome=outcome, now=now)
    return (holder or lesson_head(lesson=existing)), "confirmed"


def _reverse_inverse(*, lesson: Lesson, outcome: Outcome, now) -> None:
    """ "Prefer A over B for T" is superseded by a passed outcome that learned the reverse.

    Only project lessons of this project. A live one a person pinned or sealed
    stays; a retired one is linked too, so that the history shows what replaced it.
    """
    inverse = (
        Lesson.objects.select_for_update()
        .filter(
            workspace_id=lesson.workspace_id,
            superseded_by__isnull=True,
            scope=LessonScope.PROJECT,
            project_digest=lesson.project_digest,
            operation_key=lesson.avoid_operation_key,
            avoid_operation_key=lesson.operation_key,
            target=lesson.target,
        )
        .filter(Q(state=LessonState.RETIRED) | Q(pinned=False, sealed=False))
        .exclude(pk=lesson.pk)
    )
    for old in inverse:
        lesson_supersede(old, by=lesson, reason=SupersedeReason.REVERSED)
        audit_record(
            workspace=lesson.workspace,
            actor="system:outcomes",
            action="lesson.reverse",
            target_type="lesson",
            target_id=old.pk,
            reason=f"outcome {outcome.pk} passed the other way round",
            details={"superseded_by": lesson.pk, "outcome": outcome.pk},
        )
