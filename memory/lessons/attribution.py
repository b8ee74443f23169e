"""Attribution: what a harness outcome that had a lesson in play says about it
(SPEC section 4). A passed one confirms it (+test_passed once per outcome, then maybe a
promotion), a failed one on its operation contradicts it (-0.25 once, then maybe a
demotion); an agent token's outcome is the model's own word and refreshes recency only.
The first in-play confirmation also lets the evidence the lesson's author cited count.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from memory.lessons.evidence import confidence_apply, evidence_apply
from memory.lessons.evidence_links import lesson_evidence_attach
from memory.lessons.lifecycle import RELATION_SUPPORTS
from memory.lessons.promotion import lesson_demote_if_foreign, lesson_promote_if_confirmed
from memory.models import (
    Channel,
    ConfidenceCause,
    ConfidenceChange,
    EvidenceKind,
    Knowledge,
    Lesson,
    LessonEvidence,
    Outcome,
    TargetType,
)

_CONTRADICTS = LessonEvidence.Relation.CONTRADICTS
_CITED = LessonEvidence.Relation.CITED
# The ledger kind of the one move cited evidence makes (``cited_evidence_count``).
CITED_KIND = "cited"


def cited_evidence_count(*, lesson: Lesson, now) -> None:
    """The evidence an agent cited for ``lesson`` counts, once: the first harness
    outcome that had the lesson in play has just confirmed it (and activated it). It is
    lifted by the gap between a verified lesson's birth confidence and a claimed one's
    (0.5 - 0.3), as if it had been born of verified evidence: one ledger row of kind
    ``cited``, never again for this row, however many outcomes it cited."""
    if not LessonEvidence.objects.filter(lesson=lesson, relation=_CITED).exists():
        return
    if ConfidenceChange.objects.filter(
        target_type=TargetType.LESSON, target_id=lesson.pk, kind=CITED_KIND
    ).exists():
        return
    lift = settings.CAIRN_LESSON_BIRTH_CONFIDENCE - settings.CAIRN_LESSON_CLAIMED_CONFIDENCE
    confidence_apply(
        target=lesson,
        new=min(settings.CAIRN_LESSON_CONFIDENCE_MAX, lesson.confidence + lift),
        cause=ConfidenceCause.EVIDENCE,
        kind=CITED_KIND,
        evidence_id=f"cited:lesson:{lesson.pk}",
        channel=Channel.HARNESS,
        at=now,
    )


@transaction.atomic(savepoint=False)
def lesson_confirm_by_outcome(
    *,
    lesson: Lesson,
    outcome: Outcome,
    now=None,
    locked: bool = False,
    twins: bool | None = None,
    attached: bool = False,
    in_play: bool = False,
) -> Lesson | None:
    """A passed outcome supports ``lesson``: +test_passed once per outcome, then promotion.

    Returns the lesson now holding the evidence (the global one after a
    promotion), or None when this outcome had already been counted or was the
    model's own word: an agent token's outcome only refreshes recency
    (self_report) and is never attached as evidence. ``locked`` and ``twins``
    are what the caller already knows (see ``evidence_apply`` and
    ``lesson_promote_if_confirmed``); ``attached``: the caller has just written
    this (lesson, outcome) link itself, new (see ``outcome_record``); ``in_play``:
    the harness sent this lesson in the outcome's ``in_play`` (only then does
    evidence the lesson's author cited count, see ``cited_evidence_count``).
    """
    if outcome.channel != Channel.HARNESS:
        _self_report(target=lesson, outcome=outcome, now=now, locked=locked)
        return None
    if not attached and not lesson_evidence_attach(
        lesson=lesson, outcome=outcome, relation=RELATION_SUPPORTS
    ):
        return None
    applied = evidence_apply(
        target=lesson,
        kind=EvidenceKind.TEST_PASSED,
        evidence_id=f"outcome:{outcome.pk}",
        channel=outcome.channel,
        now=now,
        locked=locked,
    )
    lesson = applied.target
    if in_play and applied.activated:
        cited_evidence_count(lesson=lesson, now=now)
    return lesson_promote_if_confirmed(lesson=lesson, now=now, twins=twins) or lesson


@transaction.atomic(savepoint=False)
def lesson_contradict_by_outcome(
    *, lesson: Lesson, outcome: Outcome, now=None, locked: bool = False, attached: bool = False
) -> bool:
    """A failed outcome on the lesson's operation: -0.25 once, and maybe a demotion.
    An agent token's outcome says nothing weighted (self_report: recency only).
    ``attached`` as for ``lesson_confirm_by_outcome``."""
    if outcome.channel != Channel.HARNESS:
        _self_report(target=lesson, outcome=outcome, now=now, locked=locked)
        return False
    if not attached and not lesson_evidence_attach(
        lesson=lesson, outcome=outcome, relation=_CONTRADICTS
    ):
        return False
    lesson = evidence_apply(
        target=lesson,
        kind=EvidenceKind.CONTRADICTION,
        evidence_id=f"outcome:{outcome.pk}",
        channel=outcome.channel,
        now=now,
        locked=locked,
    ).target
    lesson_demote_if_foreign(lesson=lesson, outcome=outcome, now=now)
    return True


def _self_report(
    *, target: Lesson | Knowledge, outcome: Outcome, now, locked: bool = False
) -> None:
    evidence_apply(
        target=target,
        kind=EvidenceKind.SELF_REPORT,
        evidence_id=f"outcome:{outcome.pk}",
        channel=outcome.channel,
        now=now,
        locked=locked,
    )
