"""Mechanical lessons: what the loop learns by itself (SPEC section 4). A failed command
``(A, T)`` then an ok command ``(B, T)`` in a passed outcome writes "Use `B` instead of
`A` for T." (``lesson_text``), active when the harness reported the outcome, claimed
when an agent token did. It supersedes the live lessons of the project that recommend
A for T: the outcome has just shown A failing on T (the lesson that said the reverse,
and the one that recommended A over a third command alike), so the next plan serves
the newer one.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from memory.core.audit import audit_record
from memory.core.trust import birth_of
from memory.lessons.attribution import lesson_confirm_by_outcome
from memory.lessons.evidence_links import lesson_evidence_attach
from memory.lessons.lesson_text import mechanical_text
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


@transaction.atomic(savepoint=False)
def lesson_learn_mechanical(
    *, outcome: Outcome, failed_op: str, ok_op: str, target: str, now=None
) -> tuple[Lesson, str] | None:
    """Learn "Use `B` instead of `A` for T." from a passed outcome; returns (lesson, what happened).

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
    _supersede_outrun(lesson=lesson, outcome=outcome, now=now)
    promoted = lesson_promote_if_confirmed(lesson=lesson, now=now)
    return (promoted or lesson), "created"


def _learned_again(*, existing: Lesson, outcome: Outcome, now) -> tuple[Lesson, str]:
    if outcome.channel != Channel.HARNESS:
        # The model's own word: recency only, which the caller marks after its commit
        # (memory.lessons.recency), so this transaction takes no lock on the row.
        return lesson_head(lesson=existing), "self_report"
    holder = lesson_confirm_by_outcome(lesson=existing, outcome=outcome, now=now)
    return (holder or lesson_head(lesson=existing)), "confirmed"


def _supersede_outrun(*, lesson: Lesson, outcome: Outcome, now) -> None:
    """The live lessons that recommend what ``lesson`` avoids, on its target, are
    superseded by it: the same passed outcome saw their command fail on that target and
    another one work (their reverse, "Use `A` instead of `B`", and a stale "Use `A`
    instead of `C`" alike; the outcome has contradicted the in-play ones already).
    Recovery after the world changes takes one rescued turn, not the slow decay of
    a confident lesson (SPEC section 4, amended 2026-12-07).

    Only project lessons of this project. A live one a person pinned or sealed
    stays; a retired one is linked too, so that the history shows what replaced it.
    """
    outrun = (
        Lesson.objects.select_for_update()
        .filter(
            workspace_id=lesson.workspace_id,
            superseded_by__isnull=True,
            scope=LessonScope.PROJECT,
            project_digest=lesson.project_digest,
            operation_key=lesson.avoid_operation_key,
            target=lesson.target,
        )
        .filter(Q(state=LessonState.RETIRED) | Q(pinned=False, sealed=False))
        .exclude(pk=lesson.pk)
    )
    for old in outrun:
        lesson_supersede(old, by=lesson, reason=SupersedeReason.REVERSED)
        audit_record(
            workspace=lesson.workspace,
            actor="system:outcomes",
            action="lesson.reverse",
            target_type="lesson",
            target_id=old.pk,
            reason=f"outcome {outcome.pk}: what it recommends failed on {lesson.target}",
            details={"superseded_by": lesson.pk, "outcome": outcome.pk},
        )
