"""What erasure recomputes: a lesson's or knowledge item's confidence replayed from the
evidence it keeps once some is erased (``confidence_rebuild``, called by
``memory.privacy``). The one move it makes goes through ``confidence_apply``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory.core.audit import audit_record
from memory.lessons.evidence import (
    confidence_apply,
    confidence_clamp,
    evidence_effect,
    evidence_is_positive,
    lesson_retire_system,
)
from memory.models import (
    Channel,
    ConfidenceCause,
    ConfidenceChange,
    Evidence,
    EvidenceKind,
    Knowledge,
    Lesson,
    LessonEvidence,
    LessonState,
    Workspace,
)


def _undo(kind: str, target_type: str, value: float) -> float:
    """The confidence before one piece of evidence of ``kind`` moved it to ``value``
    (unclamped inverse of the policy: used for evidence inherited through an edit or
    a promotion, whose effect is baked into the row's birth confidence)."""
    op, amount = settings.CAIRN_EVIDENCE_POLICY[kind][target_type]
    if op == "add":
        return value - amount
    return value / amount if amount else value


@transaction.atomic
def confidence_rebuild(
    *,
    workspace: Workspace,
    label: str,
    pk: int,
    erased_evidence_ids,
    erased_outcomes,
    erased_posted,
) -> dict[str, int]:
    """Recompute a lesson's or item's confidence from the evidence it keeps.

    1. Lock the row. Its birth confidence is its confidence minus the ledger's sum
       (``birth + sum(after - before) == confidence`` holds for every target).
    2. Undo evidence links to erased outcomes inherited without a ledger row of
       this row's own (an edit or promotion copied them), then replay the row's own
       ledger in order, skipping rows that cite erased evidence: evidence by the
       kind's policy, decay and people's changes as the amounts they moved.
    3. Delete the links, strip the erased citations from the ledger (the rows stay
       so the sum still holds), and write the difference as one ledger row with
       cause ``person`` and kind ``erasure``.
    4. A lesson with no supporting evidence left is claimed again (never served
       until confirmed); one below the retirement floor is retired, as evidence would.

    ``erased_evidence_ids`` are the ledger citations going (``outcome:<id>`` and
    posted evidence ids); ``erased_outcomes`` and ``erased_posted`` are querysets
    (or id lists) of the Outcome and Evidence rows the erasure removes.
    """

    model = {"memory.Lesson": Lesson, "memory.Knowledge": Knowledge}[label]
    target = model._default_manager.select_for_update().filter(pk=pk).first()
    if target is None:
        return {}
    target_type = "lesson" if label == "memory.Lesson" else "knowledge"
    ledger = list(
        ConfidenceChange.objects.filter(target_type=target_type, target_id=pk).order_by("at", "id")
    )
    erased_ids = set(
        ConfidenceChange.objects.filter(
            target_type=target_type, target_id=pk, evidence_id__in=erased_evidence_ids
        ).values_list("evidence_id", flat=True)
    )
    links = []
    if target_type == "lesson":
        links = list(LessonEvidence.objects.filter(lesson_id=pk, outcome__in=erased_outcomes))
    own_citations = {row.evidence_id for row in ledger}
    before = float(target.confidence)
    running = before - sum(row.after - row.before for row in ledger)
    for link in links:
        if f"outcome:{link.outcome_id}" in own_citations:
            continue
        if link.relation == LessonEvidence.Relation.CITED:
            continue  # cited links never moved it (their one lift is a ledger row)
        kind = (
            EvidenceKind.TEST_PASSED
            if link.relation == LessonEvidence.Relation.SUPPORTS
            else EvidenceKind.CONTRADICTION
        )
        running = confidence_clamp(target_type, _undo(kind, target_type, running))
    probe = model(pk=pk, confidence=running, sealed=getattr(target, "sealed", False))
    for row in ledger:
        if row.evidence_id in erased_ids:
            continue
        if row.cause == ConfidenceCause.EVIDENCE and row.kind in settings.CAIRN_EVIDENCE_POLICY:
            probe.confidence = evidence_effect(kind=row.kind, target=probe)
        else:
            probe.confidence = confidence_clamp(
                target_type, probe.confidence + (row.after - row.before)
            )
    counts: dict[str, int] = {}
    if links:
        _, deleted = LessonEvidence.objects.filter(pk__in=[link.pk for link in links]).delete()
        counts.update(deleted)
    ConfidenceChange.objects.filter(
        target_type=target_type, target_id=pk, evidence_id__in=erased_ids
    ).update(evidence_id="erased")
    confidence_apply(
        target=target,
        new=probe.confidence,
        cause=ConfidenceCause.PERSON,
        kind="erasure",
        channel=Channel.PERSON,
    )
    details = {"before": before, "after": target.confidence}
    if target_type == "lesson":
        supported = LessonEvidence.objects.filter(
            lesson_id=pk, relation=LessonEvidence.Relation.SUPPORTS
        ).exists() or any(
            evidence_is_positive(kind, "lesson")
            for kind in Evidence.objects.filter(target_type="lesson", target_id=pk)
            .exclude(pk__in=erased_posted)
            .values_list("kind", flat=True)
        )
        if target.state == LessonState.ACTIVE and not supported:
            model._default_manager.filter(pk=pk).update(
                state=LessonState.CLAIMED, updated_at=timezone.now()
            )
            target.state = LessonState.CLAIMED
            details["state"] = LessonState.CLAIMED
        if (
            target.state != LessonState.RETIRED
            and target.superseded_by_id is None
            and target.confidence < settings.CAIRN_LESSON_RETIRE_BELOW
            and not target.pinned
        ):
            lesson_retire_system(
                lesson=target,
                actor="system:erasure",
                reason="confidence fell below the floor once erased evidence was removed",
            )
            details["state"] = LessonState.RETIRED
    audit_record(
        workspace=workspace,
        actor="system:erasure",
        action="erasure.recompute",
        target_type=target_type,
        target_id=pk,
        details=details,
    )
    return counts
