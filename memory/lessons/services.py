"""Lessons: earned from outcomes, superseded never deleted (SPEC section 4).

Where lessons come from, in order of trust:
1. the loop, mechanically (``lesson_learn_mechanical``): a failed ``(A, T)``
   then an ok ``(B, T)`` in a passed outcome writes "Prefer B over A for T.";
2. ``POST /lessons/`` (``lesson_create``): words, usually the model's. The row is
   *claimed* at 0.3 and never served until a harness outcome that had it in play
   confirms it. Evidence ids it cites (each a passed harness outcome of the same
   workspace and project that ran the operation) are kept as ``cited`` links and
   weigh only once that first in-play confirmation comes (``cited_evidence_count``):
   an outcome that never had the lesson in play says nothing about its words.

Confidence moves only through ``memory.lessons.evidence``.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.audit import audit_record
from memory.core.validation import rationale_clean
from memory.lessons.evidence import confidence_apply, evidence_apply, lesson_retire_system
from memory.lessons.lifecycle import (
    MECHANICAL_TEXT_MAX_CHARS,
    RELATION_SUPPORTS,
    agent_actor_label,
    current_lessons,
    lesson_supersede,
    lesson_text_clean,
    lesson_text_normalize,
    operation_key_clean,
    retired_by_person_blocking,
)
from memory.lessons.promotion import lesson_demote_if_foreign, lesson_promote_if_confirmed
from memory.lessons.selectors import lesson_head
from memory.models import (
    Agent,
    Channel,
    ConfidenceCause,
    ConfidenceChange,
    EvidenceKind,
    Knowledge,
    Lesson,
    LessonEvidence,
    LessonScope,
    LessonSource,
    LessonState,
    Outcome,
    StepOutcome,
    SupersedeReason,
    TargetType,
    Workspace,
)

EVIDENCE_IDS_MAX = 50
_CONTRADICTS = LessonEvidence.Relation.CONTRADICTS
_CITED = LessonEvidence.Relation.CITED
# The ledger kind of the one move cited evidence makes (``cited_evidence_count``).
CITED_KIND = "cited"


# --- text -----------------------------------------------------------------------------


# --- evidence rows and lineage ----------------------------------------------------------


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


def _current_equivalent(
    *, workspace: Workspace, operation_key: str, normalized_text: str, project_digest: str
) -> Lesson | None:
    """The live lesson saying the same thing here: this project's first, else the global one."""
    same = current_lessons(workspace).filter(
        operation_key=operation_key, normalized_text=normalized_text
    )
    return (
        same.filter(scope=LessonScope.PROJECT, project_digest=project_digest).order_by("id").first()
        or same.filter(scope=LessonScope.GLOBAL).order_by("id").first()
    )


# --- creation by agents (POST /lessons/) --------------------------------------------------


def _evidence_validate(
    *, workspace: Workspace, project_digest: str, operation_key: str, evidence_ids: list[int]
) -> list[Outcome]:
    """Each id must be a harness-reported, passed outcome of this workspace and project
    whose approach has an ok step for ``operation_key``; else 422 naming every bad id
    with its reason: ``unknown``, ``agent_reported``, ``not_passed``, ``operation_not_run``.
    """
    ids = list(dict.fromkeys(int(i) for i in evidence_ids))
    if len(ids) > EVIDENCE_IDS_MAX:
        raise ApplicationError(
            f"At most {EVIDENCE_IDS_MAX} evidence ids.",
            code="invalid",
            fields={"evidence": ["too many"]},
            status_code=400,
        )
    found = {
        o.pk: o
        for o in Outcome.objects.filter(
            workspace=workspace, project_digest=project_digest, pk__in=ids
        )
    }
    problems: list[str] = []
    for outcome_id in ids:
        reason = _evidence_problem(found.get(outcome_id), operation_key=operation_key)
        if reason:
            problems.append(f"{outcome_id}: {reason}")
    if problems:
        raise ApplicationError(
            "Evidence refused: " + "; ".join(problems) + ".",
            code="evidence_refused",
            fields={"evidence": problems},
        )
    return [found[i] for i in ids]


def _evidence_problem(outcome: Outcome | None, *, operation_key: str) -> str:
    """Why an outcome cannot be a lesson's evidence ("" when it can)."""
    if outcome is None:
        # The same words for missing, another workspace's and another project's.
        return "unknown (no such outcome in this workspace and project)"
    if outcome.channel != Channel.HARNESS:
        return (
            "agent_reported (an agent token's outcome is the model's own word; "
            "post outcomes with the harness token)"
        )
    if outcome.passed is not True:
        state = "failed" if outcome.passed is False else "nothing was verified (passed=null)"
        return f"not_passed ({state})"
    if not any(
        step.get("operation_key") == operation_key and step.get("outcome") == StepOutcome.OK
        for step in outcome.approach
    ):
        return f"operation_not_run (its approach has no ok step for {operation_key!r})"
    return ""


@transaction.atomic
def lesson_create(
    *,
    workspace: Workspace,
    agent: Agent | None,
    text: str,
    operation_key: str,
    project_digest: str,
    evidence_ids: list[int] | None = None,
    source: str = LessonSource.MODEL,
    rationale: str | None = None,
    now: datetime | None = None,
    channel: str = Channel.AGENT,
) -> tuple[Lesson, bool]:
    """Create a project lesson; returns (lesson, created).

    1. Validate text, operation and every evidence id (422 naming each bad id).
    2. Refuse to re-learn a lesson a person retired from the same evidence ids.
    3. An equivalent live lesson here (or a global one) is answered instead of a
       duplicate; the new ids are kept on it as cited, and move nothing (posting the
       same words again with each new outcome is not evidence).
    4. Otherwise insert it claimed at 0.3 with its evidence ids as ``cited`` links,
       whatever token posts it: only a harness outcome with the lesson in play
       activates it (``lesson_confirm_by_outcome`` with ``in_play``).
    """
    now = now or timezone.now()
    text = lesson_text_clean(text, max_chars=settings.CAIRN_LESSON_TEXT_MAX_CHARS)
    operation_key = operation_key_clean(operation_key)
    rationale = rationale_clean(rationale)
    if source not in LessonSource.values or source == LessonSource.USER:
        raise ApplicationError(
            "Agents may post lessons from source 'model' or 'extractor'.",
            code="invalid",
            fields={"source": ["model or extractor"]},
            status_code=400,
        )
    normalized = lesson_text_normalize(text)
    outcomes = _evidence_validate(
        workspace=workspace,
        project_digest=project_digest,
        operation_key=operation_key,
        evidence_ids=evidence_ids or [],
    )
    blocked = retired_by_person_blocking(
        workspace=workspace,
        operation_key=operation_key,
        normalized_text=normalized,
        outcome_ids=[o.pk for o in outcomes],
    )
    if blocked is not None:
        raise ApplicationError(
            f"A person retired this lesson (lesson {blocked.pk}); it is not re-learned "
            "from the same evidence ids.",
            code="retired_by_person",
            fields={"evidence": [f"lesson {blocked.pk} was retired by a person"]},
        )
    existing = _current_equivalent(
        workspace=workspace,
        operation_key=operation_key,
        normalized_text=normalized,
        project_digest=project_digest,
    )
    if existing is not None:
        return _cite_each(lesson=existing, outcomes=outcomes), False
    birth = settings.CAIRN_LESSON_CLAIMED_CONFIDENCE
    try:
        with transaction.atomic():
            lesson = Lesson.objects.create(
                workspace=workspace,
                agent=agent,
                text=text,
                normalized_text=normalized,
                operation_key=operation_key,
                rationale=rationale,
                scope=LessonScope.PROJECT,
                project_digest=project_digest,
                confidence=birth,
                birth_confidence=birth,
                state=LessonState.CLAIMED,
                source=source,
                channel=channel,
            )
    except IntegrityError:
        # A concurrent twin won the one-live-lesson constraint: confirm it instead.
        existing = _current_equivalent(
            workspace=workspace,
            operation_key=operation_key,
            normalized_text=normalized,
            project_digest=project_digest,
        )
        if existing is None:  # pragma: no cover - another constraint failed
            raise
        return _cite_each(lesson=existing, outcomes=outcomes), False
    for outcome in outcomes:
        lesson_evidence_attach(lesson=lesson, outcome=outcome, relation=_CITED)
    audit_record(
        workspace=workspace,
        actor=agent_actor_label(agent),
        action="lesson.create",
        target_type="lesson",
        target_id=lesson.pk,
        details={"state": lesson.state, "cited": [o.pk for o in outcomes]},
    )
    return lesson, True


def _cite_each(*, lesson: Lesson, outcomes: list[Outcome]) -> Lesson:
    """Keep ``outcomes`` as cited on the live lesson: shown, weighed by nothing now."""
    for outcome in outcomes:
        lesson_evidence_attach(lesson=lesson, outcome=outcome, relation=_CITED)
    return lesson_head(lesson=lesson)


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


# --- attribution from outcomes ----------------------------------------------------------


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


# --- mechanical lessons ------------------------------------------------------------------


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
    existing = _current_equivalent(
        workspace=workspace,
        operation_key=ok_op,
        normalized_text=normalized,
        project_digest=outcome.project_digest,
    )
    verified = outcome.channel == Channel.HARNESS
    if existing is not None:
        return _learned_again(existing=existing, outcome=outcome, now=now)
    confidence = (
        settings.CAIRN_LESSON_BIRTH_CONFIDENCE
        if verified
        else settings.CAIRN_LESSON_CLAIMED_CONFIDENCE
    )
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
                state=LessonState.ACTIVE if verified else LessonState.CLAIMED,
                source=LessonSource.LOOP,
                channel=outcome.channel,
            )
    except IntegrityError:
        existing = _current_equivalent(
            workspace=workspace,
            operation_key=ok_op,
            normalized_text=normalized,
            project_digest=outcome.project_digest,
        )
        if existing is None:  # pragma: no cover - another constraint failed
            raise
        return _learned_again(existing=existing, outcome=outcome, now=now)
    if verified:
        lesson_evidence_attach(lesson=lesson, outcome=outcome)
    audit_record(
        workspace=workspace,
        actor="system:outcomes",
        action="lesson.learn",
        target_type="lesson",
        target_id=lesson.pk,
        details={"outcome": outcome.pk, "source": LessonSource.LOOP, "channel": outcome.channel},
    )
    if not verified:
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


# --- promotion and demotion --------------------------------------------------------------


# --- edit, retire, restore ----------------------------------------------------------------


# --- serving (recency only) ---------------------------------------------------------------


def context_mark_served(
    *, lesson_ids: list[int], knowledge_ids: list[int], now: datetime | None = None
) -> None:
    """Serving refreshes recency (last_used_at, use_count), never confidence."""
    now = now or timezone.now()
    if lesson_ids:
        Lesson.objects.filter(pk__in=lesson_ids).update(
            last_used_at=now, use_count=F("use_count") + 1
        )
    if knowledge_ids:
        Knowledge.objects.filter(pk__in=knowledge_ids).update(
            last_used_at=now, use_count=F("use_count") + 1
        )


# --- caps -----------------------------------------------------------------------------------


def lesson_caps_enforce(*, workspace: Workspace | None = None, now=None) -> dict:
    """Beyond the cap of live lessons per project scope (and globally), retire the lowest
    confidence ones (oldest first on ties; pinned lessons are never retired by the cap)."""
    now = now or timezone.now()
    caps = {
        LessonScope.PROJECT: settings.CAIRN_LESSON_CAP_PER_PROJECT,
        LessonScope.GLOBAL: settings.CAIRN_LESSON_CAP_GLOBAL,
    }
    live = Lesson.objects.filter(superseded_by__isnull=True).exclude(state=LessonState.RETIRED)
    if workspace is not None:
        live = live.filter(workspace=workspace)
    groups = (
        live.values("workspace_id", "scope", "project_digest")
        .annotate(n=Count("id"))
        .filter(n__gt=min(caps.values()))
        .order_by("workspace_id", "scope", "project_digest")
    )
    counts: dict = defaultdict(int)
    for group in groups:
        excess = group["n"] - caps[group["scope"]]
        if excess <= 0:
            continue
        with transaction.atomic():
            victims = list(
                live.select_for_update()
                .filter(
                    workspace_id=group["workspace_id"],
                    scope=group["scope"],
                    project_digest=group["project_digest"],
                    pinned=False,
                )
                .select_related("workspace")
                .order_by("confidence", "created_at", "id")[:excess]
            )
            for lesson in victims:
                lesson_retire_system(
                    lesson=lesson,
                    actor="system:maintenance",
                    reason=f"over the cap of {caps[group['scope']]} live {group['scope']} lessons",
                    now=now,
                )
                counts["lessons_retired_by_cap"] += 1
    return {
        "lessons_retired_by_cap": counts["lessons_retired_by_cap"],
        "groups_checked": len(groups),
    }
