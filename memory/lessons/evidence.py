"""The evidence engine: the one place confidence moves (SPEC section 4).

``confidence_apply`` is the only code that changes the confidence of a lesson
or a knowledge item, and it always writes a ``ConfidenceChange`` ledger row, so
for every target ``birth + sum(after - before) == confidence``.

``evidence_apply`` turns one piece of evidence into a change, by the per-kind
policy in ``settings.CAIRN_EVIDENCE_POLICY``:

=============== ============================ ===============================
kind            lesson                       knowledge strength
=============== ============================ ===============================
self_report     recency only                 recency only
test_passed     +0.15                        +0.15
diff_accepted   +0.15                        +0.15
user_confirmed  +0.15                        +0.15
contradiction   -0.25                        x0.7
=============== ============================ ===============================

Lessons are clamped to [0.05, 0.95], knowledge to [0, 1]. Sealed items are
never pushed below the recall floor (0.2) by evidence: every piece of
evidence is an agent's report.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from cairn.errors import ApplicationError, NotFoundError
from memory.core.actors import Actor, actor_require_role
from memory.core.audit import audit_record
from memory.core.locks import advisory_xact_lock
from memory.models import (
    Channel,
    ConfidenceCause,
    ConfidenceChange,
    Evidence,
    EvidenceKind,
    Knowledge,
    KnowledgeStatus,
    Lesson,
    LessonEvidence,
    LessonState,
    RetiredBy,
    TargetType,
    Workspace,
)
from memory.webhooks.events import lesson_retired_event

# Kinds an agent may post; the other two are derived from outcomes by the server.
POSTABLE_KINDS = (EvidenceKind.DIFF_ACCEPTED, EvidenceKind.USER_CONFIRMED, EvidenceKind.SELF_REPORT)
_EPSILON = 1e-9


def target_type_of(target: Lesson | Knowledge) -> str:
    if isinstance(target, Lesson):
        return TargetType.LESSON
    if isinstance(target, Knowledge):
        return TargetType.KNOWLEDGE
    raise TypeError(f"confidence has no meaning for {type(target).__name__}")


def _model_for(target_type: str):
    return Lesson if target_type == TargetType.LESSON else Knowledge


# Inner services join the caller's transaction (no savepoint): nothing between them
# catches an error and carries on, so a failure rolls the whole write back anyway.
@transaction.atomic(savepoint=False)
def confidence_apply(
    *,
    target: Lesson | Knowledge,
    new: float,
    cause: str,
    kind: str = "",
    evidence_id: str = "",
    at: datetime | None = None,
    channel: str = Channel.SYSTEM,
) -> ConfidenceChange | None:
    """Set ``target.confidence`` to ``new`` and write the ledger row; no-op when unchanged.

    The caller holds the row lock (``select_for_update``) when it read ``target``.
    ``channel`` says who reported what moved it: the harness, a person, or the
    system (decay, reconcile). The agent channel never moves a confidence.
    """
    if channel not in (Channel.HARNESS, Channel.PERSON, Channel.SYSTEM):
        raise ApplicationError(
            "The model's own word never moves a confidence: only evidence the harness "
            "reported or a person's action does.",
            code="channel_not_allowed",
            status_code=403,
        )
    if cause not in ConfidenceCause.values:
        raise ValueError(f"unknown cause {cause!r}")
    target_type = target_type_of(target)
    new = _stored(new)
    before = float(target.confidence)
    if abs(new - before) < _EPSILON:
        return None
    at = at or timezone.now()
    change = ConfidenceChange(
        workspace_id=target.workspace_id,
        target_type=target_type,
        target_id=target.pk,
        before=before,
        after=new,
        kind=kind,
        evidence_id=evidence_id[:200],
        cause=cause,
        channel=channel,
        at=at,
    )
    _move_and_record(table=_model_for(target_type)._meta.db_table, change=change)
    target.confidence = new
    return change


_LEDGER_COLUMNS = (
    "workspace_id",
    "target_type",
    "target_id",
    "before",
    "after",
    "kind",
    "evidence_id",
    "cause",
    "channel",
    "at",
)


def _move_and_record(*, table: str, change: ConfidenceChange) -> None:
    """UPDATE the target's confidence and INSERT its ledger row in one statement (a
    data-modifying CTE: one round trip; both or neither)."""
    qn = connection.ops.quote_name
    columns = ", ".join(qn(c) for c in _LEDGER_COLUMNS)
    values = ", ".join(["%s"] * len(_LEDGER_COLUMNS))
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH moved AS (UPDATE {qn(table)} SET confidence = %s, updated_at = %s "
            f"WHERE id = %s RETURNING id) "
            f"INSERT INTO {qn(ConfidenceChange._meta.db_table)} ({columns}) "
            f"VALUES ({values}) RETURNING id",
            [change.after, change.at, change.target_id]
            + [getattr(change, c) for c in _LEDGER_COLUMNS],
        )
        change.pk = cursor.fetchone()[0]
    change._state.adding = False
    change._state.db = connection.alias


def evidence_effect(*, kind: str, target: Lesson | Knowledge) -> float:
    """The confidence ``target`` would have after one piece of evidence of ``kind``."""
    target_type = target_type_of(target)
    op, amount = settings.CAIRN_EVIDENCE_POLICY[kind][target_type]
    before = float(target.confidence)
    new = before + amount if op == "add" else before * amount
    new = _clamp(target_type, new)
    if target.sealed and new < before:
        # A person's rule: agents' reports may lower it, never below the recall floor.
        new = max(new, min(before, settings.CAIRN_RECALL_FLOOR))
    return new


def evidence_moves(*, kind: str, target: Lesson | Knowledge) -> bool:
    """Whether one piece of evidence of ``kind`` would change ``target``'s confidence
    (``confidence_apply`` writes nothing when it would not: a confirmation of a lesson
    already at its ceiling)."""
    return abs(_stored(evidence_effect(kind=kind, target=target)) - target.confidence) >= _EPSILON


def _stored(confidence: float) -> float:
    """A confidence as the ledger and the row keep it."""
    return round(min(1.0, max(0.0, float(confidence))), 6)


def evidence_is_positive(kind: str, target_type: str) -> bool:
    op, amount = settings.CAIRN_EVIDENCE_POLICY[kind][target_type]
    return (op == "add" and amount > 0) or (op == "mul" and amount > 1)


@dataclass
class EvidenceResult:
    target: Lesson | Knowledge  # the row as it is now (locked by this transaction)
    target_type: str
    target_id: int
    before: float
    after: float
    kind: str = ""  # what was applied: an agent's weighted kind counts as self_report
    retired: bool = False
    activated: bool = False


def _lock(target: Lesson | Knowledge) -> Lesson | Knowledge:
    model = type(target)
    return model.objects.select_for_update().get(pk=target.pk)


@transaction.atomic(savepoint=False)
def evidence_apply(
    *,
    target: Lesson | Knowledge,
    kind: str,
    evidence_id: str,
    channel: str,
    now: datetime | None = None,
    locked: bool = False,
) -> EvidenceResult:
    """Apply one piece of evidence to a live lesson or knowledge item.

    ``locked``: the caller read ``target`` with ``select_for_update`` in this
    transaction, so it is current and locked already (one query fewer).

    0. Only the harness and people produce weighted evidence: anything from the
       agent channel is applied as a self-report (recency only), whatever its kind.
    1. Lock the row and compute the new confidence by the kind's policy.
    2. Change it through ``confidence_apply`` (one ledger row), or for a
       self-report only refresh recency (``last_used_at``, ``use_count``).
    3. Lessons: a positive piece of evidence makes a claimed lesson active;
       one that leaves it below the retirement floor retires it (unless pinned).
    """
    if kind not in settings.CAIRN_EVIDENCE_POLICY:
        raise ValueError(f"unknown evidence kind {kind!r}")
    if channel not in (Channel.HARNESS, Channel.PERSON):
        kind = EvidenceKind.SELF_REPORT
    now = now or timezone.now()
    if not locked:
        target = _lock(target)
    target_type = target_type_of(target)
    _require_live(target)
    before = float(target.confidence)
    if kind != EvidenceKind.SELF_REPORT:
        confidence_apply(
            target=target,
            new=evidence_effect(kind=kind, target=target),
            cause=ConfidenceCause.EVIDENCE,
            kind=kind,
            evidence_id=evidence_id,
            at=now,
            channel=channel,
        )
    result = EvidenceResult(
        target=target,
        target_type=target_type,
        target_id=target.pk,
        before=before,
        after=target.confidence,
        kind=kind,
    )
    if kind == EvidenceKind.SELF_REPORT:
        type(target).objects.filter(pk=target.pk).update(
            last_used_at=now, use_count=F("use_count") + 1
        )
    if target_type == TargetType.LESSON:
        if target.state == LessonState.CLAIMED and evidence_is_positive(kind, target_type):
            Lesson.objects.filter(pk=target.pk).update(state=LessonState.ACTIVE, updated_at=now)
            target.state = LessonState.ACTIVE
            result.activated = True
        if target.confidence < settings.CAIRN_LESSON_RETIRE_BELOW and not target.pinned:
            lesson_retire_system(
                lesson=target,
                actor="system:evidence",
                reason=f"confidence {target.confidence:.2f} fell below "
                f"{settings.CAIRN_LESSON_RETIRE_BELOW} after {kind}",
                now=now,
            )
            result.retired = True
    return result


def _require_live(target: Lesson | Knowledge) -> None:
    if isinstance(target, Lesson):
        if target.superseded_by_id is not None:
            raise ApplicationError(
                f"Lesson {target.pk} was superseded by lesson {target.superseded_by_id}; "
                "give evidence for the current version.",
                code="superseded",
                fields={"target_id": ["superseded"]},
            )
        if target.state == LessonState.RETIRED:
            raise ApplicationError(
                f"Lesson {target.pk} is retired.", code="retired", fields={"target_id": ["retired"]}
            )
    elif target.status != KnowledgeStatus.ACTIVE or target.superseded_by_id is not None:
        raise ApplicationError(
            f"Knowledge item {target.pk} is archived or superseded.",
            code="not_active",
            fields={"target_id": ["not active"]},
        )


# --- posted evidence (POST /evidence/) -------------------------------------------------


def _evidence_target(*, workspace: Workspace, target_type: str, target_id: int):
    model = _model_for(target_type)
    target = model.objects.filter(workspace=workspace, pk=target_id).first()
    if target is None:
        raise NotFoundError(
            f"No {target_type} {target_id} in this workspace.", fields={"target_id": ["not found"]}
        )
    return target


def _evidence_stored(*, workspace: Workspace, evidence_id: str, channel: str) -> dict | None:
    """The stored answer for this id from this channel (ids are per channel: an agent
    token's post under the harness's id is not the harness's report)."""
    row = Evidence.objects.filter(
        workspace=workspace, channel=channel, evidence_id=evidence_id
    ).first()
    return None if row is None else row.response


# A person's word, reported by the harness (which talks to the person) or given in the UI.
PERSON_KINDS = (EvidenceKind.DIFF_ACCEPTED, EvidenceKind.USER_CONFIRMED)


def evidence_record(
    *,
    workspace: Workspace,
    actor: Actor,
    evidence_id: str,
    kind: str,
    target_type: str,
    target_id: int,
) -> tuple[dict, bool]:
    """Record posted evidence once per ``evidence_id`` and channel; returns (body, created).

    0. ``user_confirmed`` and ``diff_accepted`` come only from the harness scope
       (or a person in the UI): from an agent token they are refused (403).
    1. A stored id answers with the stored body: nothing is applied twice.
    2. Otherwise insert the Evidence row and apply it in one transaction; a
       concurrent insert of the same id loses on the unique constraint and
       answers with the winner's body.
    """
    if kind not in POSTABLE_KINDS:
        raise ApplicationError(
            f"Evidence kind {kind!r} cannot be posted: test_passed and contradiction "
            "are derived by the server from outcomes.",
            code="kind_not_postable",
            fields={"kind": ["not postable"]},
        )
    if kind in PERSON_KINDS and not actor.weighs:
        raise ApplicationError(
            f"Evidence of kind {kind!r} says a person confirmed or accepted something; only "
            "a harness-scoped token (the process that talks to the person, never the model) "
            "may post it. Post self_report for the model's own view.",
            code="harness_scope_required",
            fields={"kind": [f"{kind} needs a harness-scoped token"]},
            status_code=403,
        )
    stored = _evidence_stored(workspace=workspace, evidence_id=evidence_id, channel=actor.channel)
    if stored is not None:
        return stored, False
    try:
        with transaction.atomic():
            target = _evidence_target(
                workspace=workspace, target_type=target_type, target_id=target_id
            )
            row = Evidence.objects.create(
                workspace=workspace,
                agent=actor.agent,
                evidence_id=evidence_id,
                kind=kind,
                target_type=target_type,
                target_id=target_id,
                channel=actor.channel,
            )
            result = evidence_apply(
                target=target, kind=kind, evidence_id=evidence_id, channel=actor.channel
            )
            body = {
                "id": row.pk,
                "evidence_id": evidence_id,
                "kind": kind,
                "target_type": target_type,
                "target_id": target_id,
                "channel": actor.channel,
                "counted_as": result.kind,
                "confidence_before": result.before,
                "confidence_after": result.after,
                "state": (
                    Lesson.objects.values_list("state", flat=True).get(pk=target.pk)
                    if target_type == TargetType.LESSON
                    else None
                ),
            }
            row.response = body
            row.save(update_fields=["response"])
            return body, True
    except IntegrityError:
        stored = _evidence_stored(
            workspace=workspace, evidence_id=evidence_id, channel=actor.channel
        )
        if stored is None:
            raise
        return stored, False


@transaction.atomic
def evidence_confirm_by_person(
    *, workspace: Workspace, target_type: str, target_id: int, actor: Actor, reason: str
) -> EvidenceResult:
    """A reviewer confirms a lesson or knowledge item in the UI: ``user_confirmed``
    evidence with the person as actor (+0.15; a claimed lesson becomes active).

    One person's confirmation of one target counts once per
    ``CAIRN_PERSON_CONFIRM_WINDOW_S``: a double-click, a resubmitted form or a second
    confirmation the same day is answered with the target as it is, nothing applied.
    The evidence id names person, target and window, so concurrent clicks take turns
    on it and the later ones find it recorded."""
    actor_require_role(actor, workspace=workspace, action=f"confirm a {target_type}")
    target = _evidence_target(workspace=workspace, target_type=target_type, target_id=target_id)
    window = int(timezone.now().timestamp() // settings.CAIRN_PERSON_CONFIRM_WINDOW_S)
    evidence_id = f"person:{actor.user.pk}:{target_type}:{target_id}:{window}"
    advisory_xact_lock(f"evidence:{workspace.pk}:{evidence_id}")
    if Evidence.objects.filter(workspace=workspace, evidence_id=evidence_id).exists():
        target = _lock(target)
        return EvidenceResult(
            target=target,
            target_type=target_type,
            target_id=target.pk,
            before=float(target.confidence),
            after=float(target.confidence),
            kind=EvidenceKind.USER_CONFIRMED,
        )
    Evidence.objects.create(
        workspace=workspace,
        agent=None,
        evidence_id=evidence_id,
        kind=EvidenceKind.USER_CONFIRMED,
        target_type=target_type,
        target_id=target_id,
        channel=Channel.PERSON,
    )
    result = evidence_apply(
        target=target,
        kind=EvidenceKind.USER_CONFIRMED,
        evidence_id=evidence_id,
        channel=Channel.PERSON,
    )
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action=f"{target_type}.confirm",
        target_type=target_type,
        target_id=target_id,
        reason=reason,
        details={"evidence_id": evidence_id, "before": result.before, "after": result.after},
    )
    return result


def _undo(kind: str, target_type: str, value: float) -> float:
    """The confidence before one piece of evidence of ``kind`` moved it to ``value``
    (unclamped inverse of the policy: used for evidence inherited through an edit or
    a promotion, whose effect is baked into the row's birth confidence)."""
    op, amount = settings.CAIRN_EVIDENCE_POLICY[kind][target_type]
    if op == "add":
        return value - amount
    return value / amount if amount else value


def _clamp(target_type: str, value: float) -> float:
    """The confidence range: lessons between their caps, knowledge in [0, 1]."""
    if target_type == TargetType.LESSON:
        return min(
            settings.CAIRN_LESSON_CONFIDENCE_MAX, max(settings.CAIRN_LESSON_CONFIDENCE_MIN, value)
        )
    return min(1.0, max(0.0, value))


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
        running = _clamp(target_type, _undo(kind, target_type, running))
    probe = model(pk=pk, confidence=running, sealed=getattr(target, "sealed", False))
    for row in ledger:
        if row.evidence_id in erased_ids:
            continue
        if row.cause == ConfidenceCause.EVIDENCE and row.kind in settings.CAIRN_EVIDENCE_POLICY:
            probe.confidence = evidence_effect(kind=row.kind, target=probe)
        else:
            probe.confidence = _clamp(target_type, probe.confidence + (row.after - row.before))
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


def lesson_retire_system(*, lesson: Lesson, actor: str, reason: str, now=None) -> None:
    """Retire a lesson automatically (floor, decay, cap) and record it in the audit log."""
    now = now or timezone.now()
    updated = Lesson.objects.filter(pk=lesson.pk, superseded_by__isnull=True).exclude(
        state=LessonState.RETIRED
    )
    if not updated.update(
        state=LessonState.RETIRED,
        retired_by=RetiredBy.SYSTEM,
        retired_reason=reason[:300],
        retired_at=now,
        updated_at=now,
    ):
        return
    lesson.state = LessonState.RETIRED
    lesson.retired_by = RetiredBy.SYSTEM
    lesson.retired_reason = reason[:300]
    lesson.retired_at = now
    audit_record(
        workspace=lesson.workspace,
        actor=actor,
        action="lesson.retire",
        target_type="lesson",
        target_id=lesson.pk,
        reason=reason,
        details={"confidence": lesson.confidence},
    )
    lesson_retired_event(lesson=lesson, retired_by=RetiredBy.SYSTEM)
