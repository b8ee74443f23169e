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

Evidence comes from outcomes (``memory.lessons.attribution``) and from posts and
people (``memory.lessons.posted_evidence``); erasure replays it
(``memory.lessons.confidence_rebuild``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.audit import audit_record
from memory.core.trust import channel_weighs, confidence_channel_check
from memory.models import (
    ConfidenceCause,
    ConfidenceChange,
    EvidenceKind,
    Knowledge,
    KnowledgeStatus,
    Lesson,
    LessonState,
    RetiredBy,
    TargetType,
)
from memory.webhooks.events import lesson_retired_event

_EPSILON = 1e-9


def target_type_of(target: Lesson | Knowledge) -> str:
    if isinstance(target, Lesson):
        return TargetType.LESSON
    if isinstance(target, Knowledge):
        return TargetType.KNOWLEDGE
    raise TypeError(f"confidence has no meaning for {type(target).__name__}")


def target_model(target_type: str):
    """The model a ``TargetType`` names: ``Lesson`` or ``Knowledge``."""
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
    channel: str,
) -> ConfidenceChange | None:
    """Set ``target.confidence`` to ``new`` and write the ledger row; no-op when unchanged.

    The caller holds the row lock (``select_for_update``) when it read ``target``.
    ``channel`` (required: no default opens this gate) says who reported what moved
    it: the harness or a person, either way; the system (decay, reconcile) only
    lowers; the agent channel never moves a confidence
    (``memory.core.trust.confidence_channel_check``).
    """
    if cause not in ConfidenceCause.values:
        raise ValueError(f"unknown cause {cause!r}")
    target_type = target_type_of(target)
    new = _stored(new)
    before = float(target.confidence)
    confidence_channel_check(channel=channel, before=before, after=new)
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
    _move_and_record(table=target_model(target_type)._meta.db_table, change=change)
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
    new = confidence_clamp(target_type, new)
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


def target_lock(target: Lesson | Knowledge) -> Lesson | Knowledge:
    """The target again, its row locked for this transaction."""
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
    if not channel_weighs(channel):
        kind = EvidenceKind.SELF_REPORT
    now = now or timezone.now()
    if not locked:
        target = target_lock(target)
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


def confidence_clamp(target_type: str, value: float) -> float:
    """The confidence range: lessons between their caps, knowledge in [0, 1]."""
    if target_type == TargetType.LESSON:
        return min(
            settings.CAIRN_LESSON_CONFIDENCE_MAX, max(settings.CAIRN_LESSON_CONFIDENCE_MIN, value)
        )
    return min(1.0, max(0.0, value))


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
