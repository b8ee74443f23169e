"""Lessons: earned from outcomes, superseded never deleted (SPEC section 4).

Where lessons come from, in order of trust:
1. the loop, mechanically (``lesson_learn_mechanical``): a failed ``(A, T)``
   then an ok ``(B, T)`` in a passed outcome writes "Prefer B over A for T.";
2. ``POST /lessons/`` (``lesson_create``) with evidence ids, each an existing
   passed outcome of the same workspace and project; without evidence the row
   is *claimed* at 0.3 and never served until an attributed confirmation.

Confidence moves only through ``memory.services.evidence``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.models import (
    Agent,
    ConfidenceCause,
    EvidenceKind,
    Knowledge,
    Lesson,
    LessonEvidence,
    LessonScope,
    LessonSource,
    LessonState,
    Outcome,
    RetiredBy,
    SupersedeReason,
    Workspace,
)
from memory.selectors.lessons import lesson_ancestors, lesson_head
from memory.services.audit import audit_record
from memory.services.evidence import confidence_apply, evidence_apply, lesson_retire_system
from memory.services.secrets_scan import refuse_secrets

MECHANICAL_TEXT_MAX_CHARS = 500
EVIDENCE_IDS_MAX = 50
_SUPPORTS = LessonEvidence.Relation.SUPPORTS
_CONTRADICTS = LessonEvidence.Relation.CONTRADICTS


# --- text -----------------------------------------------------------------------------


def lesson_text_normalize(text: str) -> str:
    """Equivalent text: case, whitespace and punctuation do not matter."""
    return " ".join(re.findall(r"\w+", text.casefold()))[:MECHANICAL_TEXT_MAX_CHARS]


def _text_clean(text: str, *, max_chars: int) -> str:
    cleaned = " ".join(str(text).split())
    if not cleaned:
        raise ApplicationError(
            "A lesson is one imperative sentence; it cannot be blank.",
            code="blank",
            fields={"text": ["blank"]},
            status_code=400,
        )
    if len(cleaned) > max_chars:
        raise ApplicationError(
            f"A lesson is one sentence of at most {max_chars} characters (got {len(cleaned)}).",
            code="too_long",
            fields={"text": [f"at most {max_chars} characters"]},
            status_code=400,
        )
    refuse_secrets({"text": cleaned})
    return cleaned


def _supersede(old: Lesson, *, by: Lesson, reason: str) -> None:
    """Point ``old`` at the row that replaces it; the row itself is kept (principle 4)."""
    old.superseded_by = by
    old.supersede_reason = reason
    old.save(update_fields=["superseded_by", "supersede_reason", "updated_at"])


def _operation_clean(operation_key: str) -> str:
    cleaned = str(operation_key).strip()
    if not cleaned or len(cleaned) > 200:
        raise ApplicationError(
            "operation_key must be 1-200 characters.",
            code="invalid",
            fields={"operation_key": ["1-200 characters"]},
            status_code=400,
        )
    return cleaned


def _actor(agent: Agent | None) -> str:
    return f"agent:{agent.name}" if agent else "system"


# --- evidence rows and lineage ----------------------------------------------------------


def lesson_evidence_attach(*, lesson: Lesson, outcome: Outcome, relation: str = _SUPPORTS) -> bool:
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


def _evidence_copy(*, source: Lesson, target: Lesson, only_project: str | None = None) -> None:
    rows = LessonEvidence.objects.filter(lesson=source).select_related("outcome")
    if only_project is not None:
        rows = rows.filter(outcome__project_digest=only_project)
    for row in rows:
        LessonEvidence.objects.get_or_create(
            lesson=target, outcome=row.outcome, defaults={"relation": row.relation}
        )


def _current(workspace: Workspace):
    return Lesson.objects.filter(workspace=workspace, superseded_by__isnull=True).exclude(
        state=LessonState.RETIRED
    )


def _current_equivalent(
    *, workspace: Workspace, operation_key: str, normalized_text: str, project_digest: str
) -> Lesson | None:
    """The live lesson saying the same thing here: this project's first, else the global one."""
    same = _current(workspace).filter(operation_key=operation_key, normalized_text=normalized_text)
    return (
        same.filter(scope=LessonScope.PROJECT, project_digest=project_digest).order_by("id").first()
        or same.filter(scope=LessonScope.GLOBAL).order_by("id").first()
    )


def _retired_by_person_blocking(
    *, workspace: Workspace, operation_key: str, normalized_text: str, outcome_ids: list[int]
) -> Lesson | None:
    """A lesson a person retired that said the same thing on any of these outcomes."""
    if not outcome_ids:
        return None
    retired = Lesson.objects.filter(
        workspace=workspace,
        state=LessonState.RETIRED,
        retired_by=RetiredBy.PERSON,
        evidence__outcome_id__in=outcome_ids,
        evidence__relation=_SUPPORTS,
    ).distinct()
    for lesson in retired:
        lineage = [lesson, *lesson_ancestors(lesson=lesson)]
        if any(
            row.operation_key == operation_key and row.normalized_text == normalized_text
            for row in lineage
        ):
            return lesson
    return None


# --- creation by agents (POST /lessons/) --------------------------------------------------


def _evidence_validate(
    *, workspace: Workspace, project_digest: str, evidence_ids: list[int]
) -> list[Outcome]:
    """Each id must be an outcome of this workspace and project that passed; else 422 naming it."""
    ids = list(dict.fromkeys(int(i) for i in evidence_ids))
    if len(ids) > EVIDENCE_IDS_MAX:
        raise ApplicationError(
            f"At most {EVIDENCE_IDS_MAX} evidence ids.",
            code="invalid",
            fields={"evidence": ["too many"]},
            status_code=400,
        )
    found = {o.pk: o for o in Outcome.objects.filter(workspace=workspace, pk__in=ids)}
    problems: list[str] = []
    for outcome_id in ids:
        outcome = found.get(outcome_id)
        if outcome is None:
            # Same words for "missing" and "another workspace's": existence does not leak.
            problems.append(f"{outcome_id}: unknown outcome (no such outcome in this workspace)")
        elif outcome.project_digest != project_digest:
            problems.append(f"{outcome_id}: outcome belongs to another project")
        elif outcome.passed is not True:
            state = "failed" if outcome.passed is False else "nothing was verified (passed=null)"
            problems.append(f"{outcome_id}: outcome did not pass ({state})")
    if problems:
        raise ApplicationError(
            "Evidence refused: " + "; ".join(problems) + ".",
            code="evidence_refused",
            fields={"evidence": problems},
        )
    return [found[i] for i in ids]


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
    now: datetime | None = None,
) -> tuple[Lesson, bool]:
    """Create a project lesson; returns (lesson, created).

    1. Validate text, operation and every evidence id (422 naming each bad id).
    2. Refuse to re-learn a lesson a person retired from the same evidence ids.
    3. An equivalent live lesson here (or a global one) is confirmed by the new
       evidence ids instead of duplicated.
    4. Otherwise insert: active at 0.5 with evidence, claimed at 0.3 without.
    """
    now = now or timezone.now()
    text = _text_clean(text, max_chars=settings.CAIRN_LESSON_TEXT_MAX_CHARS)
    operation_key = _operation_clean(operation_key)
    if source not in LessonSource.values or source == LessonSource.USER:
        raise ApplicationError(
            "Agents may post lessons from source 'model' or 'extractor'.",
            code="invalid",
            fields={"source": ["model or extractor"]},
            status_code=400,
        )
    normalized = lesson_text_normalize(text)
    outcomes = _evidence_validate(
        workspace=workspace, project_digest=project_digest, evidence_ids=evidence_ids or []
    )
    blocked = _retired_by_person_blocking(
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
        for outcome in outcomes:
            # A confirmation may promote it: later ids go to the row that holds it now.
            existing = lesson_confirm_by_outcome(lesson=existing, outcome=outcome, now=now) or (
                lesson_head(lesson=existing)
            )
        return existing, False
    birth = (
        settings.CAIRN_LESSON_BIRTH_CONFIDENCE
        if outcomes
        else settings.CAIRN_LESSON_CLAIMED_CONFIDENCE
    )
    lesson = Lesson.objects.create(
        workspace=workspace,
        agent=agent,
        text=text,
        normalized_text=normalized,
        operation_key=operation_key,
        scope=LessonScope.PROJECT,
        project_digest=project_digest,
        confidence=birth,
        birth_confidence=birth,
        state=LessonState.ACTIVE if outcomes else LessonState.CLAIMED,
        source=source,
    )
    for outcome in outcomes:
        lesson_evidence_attach(lesson=lesson, outcome=outcome)
    audit_record(
        workspace=workspace,
        actor=_actor(agent),
        action="lesson.create",
        target_type="lesson",
        target_id=lesson.pk,
        details={"state": lesson.state, "evidence": [o.pk for o in outcomes]},
    )
    promoted = lesson_promote_if_confirmed(lesson=lesson, now=now)
    return (promoted or lesson), True


# --- attribution from outcomes ----------------------------------------------------------


@transaction.atomic(savepoint=False)
def lesson_confirm_by_outcome(*, lesson: Lesson, outcome: Outcome, now=None) -> Lesson | None:
    """A passed outcome supports ``lesson``: +test_passed once per outcome, then promotion.

    Returns the lesson now holding the evidence (the global one after a
    promotion), or None when this outcome had already been counted.
    """
    if not lesson_evidence_attach(lesson=lesson, outcome=outcome, relation=_SUPPORTS):
        return None
    lesson = evidence_apply(
        target=lesson,
        kind=EvidenceKind.TEST_PASSED,
        evidence_id=f"outcome:{outcome.pk}",
        now=now,
    ).target
    return lesson_promote_if_confirmed(lesson=lesson, now=now) or lesson


@transaction.atomic(savepoint=False)
def lesson_contradict_by_outcome(*, lesson: Lesson, outcome: Outcome, now=None) -> bool:
    """A failed outcome on the lesson's operation: -0.25 once, and maybe a demotion."""
    if not lesson_evidence_attach(lesson=lesson, outcome=outcome, relation=_CONTRADICTS):
        return False
    lesson = evidence_apply(
        target=lesson,
        kind=EvidenceKind.CONTRADICTION,
        evidence_id=f"outcome:{outcome.pk}",
        now=now,
    ).target
    lesson_demote_if_foreign(lesson=lesson, outcome=outcome, now=now)
    return True


# --- mechanical lessons ------------------------------------------------------------------


def mechanical_text(*, failed_op: str, ok_op: str, target: str) -> str:
    return f"Prefer {ok_op} over {failed_op} for {target}."


@transaction.atomic(savepoint=False)
def lesson_learn_mechanical(
    *, outcome: Outcome, failed_op: str, ok_op: str, target: str, now=None
) -> tuple[Lesson, str] | None:
    """Learn "Prefer B over A for T." from a passed outcome; returns (lesson, what happened).

    ``what`` is ``created`` or ``confirmed`` (an equivalent lesson existed), or
    None when nothing was learned (not passed, too long, or retired by a person
    on this same outcome).
    """
    if outcome.passed is not True:
        return None
    now = now or timezone.now()
    text = mechanical_text(failed_op=failed_op, ok_op=ok_op, target=target)
    if len(text) > MECHANICAL_TEXT_MAX_CHARS:
        return None
    workspace = outcome.workspace
    normalized = lesson_text_normalize(text)
    if _retired_by_person_blocking(
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
    if existing is not None:
        holder = lesson_confirm_by_outcome(lesson=existing, outcome=outcome, now=now)
        return (holder or lesson_head(lesson=existing)), "confirmed"
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
        confidence=settings.CAIRN_LESSON_BIRTH_CONFIDENCE,
        birth_confidence=settings.CAIRN_LESSON_BIRTH_CONFIDENCE,
        state=LessonState.ACTIVE,
        source=LessonSource.LOOP,
    )
    lesson_evidence_attach(lesson=lesson, outcome=outcome)
    audit_record(
        workspace=workspace,
        actor="system:outcomes",
        action="lesson.learn",
        target_type="lesson",
        target_id=lesson.pk,
        details={"outcome": outcome.pk, "source": LessonSource.LOOP},
    )
    _reverse_inverse(lesson=lesson, outcome=outcome, now=now)
    promoted = lesson_promote_if_confirmed(lesson=lesson, now=now)
    return (promoted or lesson), "created"


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
        _supersede(old, by=lesson, reason=SupersedeReason.REVERSED)
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


def _confirmed_projects(lessons: list[Lesson]) -> set[str]:
    """Projects in which these project lessons have a supporting outcome of their own project."""
    return set(
        LessonEvidence.objects.filter(
            lesson__in=lessons,
            relation=_SUPPORTS,
            outcome__project_digest=F("lesson__project_digest"),
        ).values_list("lesson__project_digest", flat=True)
    )


@transaction.atomic(savepoint=False)
def lesson_promote_if_confirmed(*, lesson: Lesson, now=None) -> Lesson | None:
    """The same lesson confirmed in two distinct projects becomes one global lesson.

    1. Lock the live, active project lessons with the same operation and
       equivalent text; keep those confirmed in their own project.
    2. With two or more projects among them, supersede them all by one global
       row (a live equivalent global row if there is one, else a new one at the
       highest member confidence) that inherits their evidence.
    3. Record the promotion in the audit log.
    """
    if lesson.scope != LessonScope.PROJECT or lesson.superseded_by_id is not None:
        return None
    equivalent = Lesson.objects.filter(
        workspace_id=lesson.workspace_id,
        operation_key=lesson.operation_key,
        normalized_text=lesson.normalized_text,
        scope=LessonScope.PROJECT,
        state=LessonState.ACTIVE,
        superseded_by__isnull=True,
    )
    if not equivalent.exclude(project_digest=lesson.project_digest).exists():
        return None  # the common case: no other project says the same thing
    members = list(equivalent.select_for_update().order_by("id"))
    projects = _confirmed_projects(members)
    if len(projects) < 2:
        return None
    members = [m for m in members if m.project_digest in projects]
    best = max(members, key=lambda m: (m.confidence, -m.pk))
    target = (
        _current(lesson.workspace)
        .filter(
            scope=LessonScope.GLOBAL,
            operation_key=lesson.operation_key,
            normalized_text=lesson.normalized_text,
        )
        .order_by("id")
        .first()
    )
    if target is None:
        target = Lesson.objects.create(
            workspace_id=lesson.workspace_id,
            agent=None,
            text=best.text,
            normalized_text=best.normalized_text,
            operation_key=best.operation_key,
            avoid_operation_key=best.avoid_operation_key,
            target=best.target,
            scope=LessonScope.GLOBAL,
            project_digest="",
            confidence=best.confidence,
            birth_confidence=best.confidence,
            state=LessonState.ACTIVE,
            source=best.source,
            pinned=any(m.pinned for m in members),
            sealed=any(m.sealed for m in members),
            use_count=sum(m.use_count for m in members),
            last_used_at=max((m.last_used_at for m in members if m.last_used_at), default=None),
        )
    for member in members:
        _evidence_copy(source=member, target=target)
        _supersede(member, by=target, reason=SupersedeReason.PROMOTED)
    audit_record(
        workspace=lesson.workspace,
        actor="system:promotion",
        action="lesson.promote",
        target_type="lesson",
        target_id=target.pk,
        reason=f"confirmed in {len(projects)} distinct projects",
        details={"sources": [m.pk for m in members], "projects": len(projects)},
    )
    return target


@transaction.atomic(savepoint=False)
def lesson_demote_if_foreign(*, lesson: Lesson, outcome: Outcome, now=None) -> Lesson | None:
    """A global lesson contradicted from a project that never confirmed it goes back to the
    project that last confirmed it (a new project row inheriting that project's evidence)."""
    if lesson.scope != LessonScope.GLOBAL:
        return None
    lesson = Lesson.objects.select_for_update().get(pk=lesson.pk)
    if (
        lesson.scope != LessonScope.GLOBAL
        or lesson.superseded_by_id is not None
        or lesson.state == LessonState.RETIRED
    ):
        return None
    supports = list(
        LessonEvidence.objects.filter(lesson=lesson, relation=_SUPPORTS)
        .select_related("outcome")
        .order_by("-outcome__created_at", "-outcome_id")
    )
    projects = {row.outcome.project_digest for row in supports}
    if not projects or outcome.project_digest in projects:
        return None
    last_project = supports[0].outcome.project_digest
    demoted = Lesson.objects.create(
        workspace_id=lesson.workspace_id,
        agent=lesson.agent,
        text=lesson.text,
        normalized_text=lesson.normalized_text,
        operation_key=lesson.operation_key,
        avoid_operation_key=lesson.avoid_operation_key,
        target=lesson.target,
        scope=LessonScope.PROJECT,
        project_digest=last_project,
        confidence=lesson.confidence,
        birth_confidence=lesson.confidence,
        state=lesson.state,
        source=lesson.source,
        pinned=lesson.pinned,
        sealed=lesson.sealed,
        use_count=lesson.use_count,
        last_used_at=lesson.last_used_at,
    )
    _evidence_copy(source=lesson, target=demoted, only_project=last_project)
    _supersede(lesson, by=demoted, reason=SupersedeReason.DEMOTED)
    audit_record(
        workspace=lesson.workspace,
        actor="system:demotion",
        action="lesson.demote",
        target_type="lesson",
        target_id=lesson.pk,
        reason=f"contradicted by outcome {outcome.pk} from a project that never confirmed it",
        details={"demoted_to": demoted.pk, "outcome": outcome.pk},
    )
    return demoted


# --- edit, retire, restore ----------------------------------------------------------------


def _lock_current(lesson: Lesson) -> Lesson:
    lesson = Lesson.objects.select_for_update().get(pk=lesson.pk)
    if lesson.superseded_by_id is not None:
        raise ApplicationError(
            f"Lesson {lesson.pk} was superseded by lesson {lesson.superseded_by_id}; "
            "change the current version.",
            code="superseded",
            fields={"id": [f"superseded by {lesson.superseded_by_id}"]},
        )
    return lesson


@transaction.atomic
def lesson_edit(
    *,
    lesson: Lesson,
    agent: Agent | None = None,
    text: str | None = None,
    operation_key: str | None = None,
    by_person: bool = False,
    actor: str | None = None,
    reason: str = "",
) -> Lesson:
    """Edit = a new row inheriting evidence and confidence; the old row points at it."""
    lesson = _lock_current(lesson)
    if lesson.state == LessonState.RETIRED:
        raise ApplicationError(
            f"Lesson {lesson.pk} is retired; it cannot be edited.",
            code="retired",
            fields={"id": ["retired"]},
        )
    if lesson.sealed and not by_person:
        raise ApplicationError(
            f"Lesson {lesson.pk} is sealed by a person; agents cannot edit it.",
            code="sealed",
            fields={"id": ["sealed"]},
        )
    new_text = (
        _text_clean(text, max_chars=settings.CAIRN_LESSON_TEXT_MAX_CHARS)
        if text is not None
        else lesson.text
    )
    new_op = _operation_clean(operation_key) if operation_key is not None else lesson.operation_key
    if new_text == lesson.text and new_op == lesson.operation_key:
        return lesson
    edited = Lesson.objects.create(
        workspace_id=lesson.workspace_id,
        agent=agent or lesson.agent,
        text=new_text,
        normalized_text=lesson_text_normalize(new_text),
        operation_key=new_op,
        avoid_operation_key=lesson.avoid_operation_key if new_op == lesson.operation_key else "",
        target=lesson.target if new_op == lesson.operation_key else "",
        scope=lesson.scope,
        project_digest=lesson.project_digest,
        confidence=lesson.confidence,
        birth_confidence=lesson.confidence,
        state=lesson.state,
        source=LessonSource.USER if by_person else lesson.source,
        pinned=lesson.pinned,
        sealed=lesson.sealed,
        use_count=lesson.use_count,
        last_used_at=lesson.last_used_at,
    )
    _evidence_copy(source=lesson, target=edited)
    _supersede(lesson, by=edited, reason=SupersedeReason.EDITED)
    audit_record(
        workspace=lesson.workspace,
        actor=actor or _actor(agent),
        action="lesson.edit",
        target_type="lesson",
        target_id=lesson.pk,
        reason=reason,
        details={"new_id": edited.pk},
    )
    return edited


@transaction.atomic
def lesson_retire(
    *,
    lesson: Lesson,
    by_person: bool = False,
    actor: str,
    reason: str = "",
    now: datetime | None = None,
) -> Lesson:
    """Forget = retire (the row stays as history). A person's retirement also means the
    lesson is never re-learned from the same evidence ids."""
    lesson = _lock_current(lesson)
    if lesson.state == LessonState.RETIRED:
        return lesson
    if lesson.sealed and not by_person:
        raise ApplicationError(
            f"Lesson {lesson.pk} is sealed by a person; only a person can retire it.",
            code="sealed",
            fields={"id": ["sealed"]},
        )
    lesson.state = LessonState.RETIRED
    lesson.retired_by = RetiredBy.PERSON if by_person else RetiredBy.AGENT
    lesson.retired_reason = reason[:300]
    lesson.retired_at = now or timezone.now()
    lesson.save(update_fields=["state", "retired_by", "retired_reason", "retired_at", "updated_at"])
    audit_record(
        workspace=lesson.workspace,
        actor=actor,
        action="lesson.retire",
        target_type="lesson",
        target_id=lesson.pk,
        reason=reason,
        details={"by": lesson.retired_by},
    )
    return lesson


@transaction.atomic
def lesson_restore(
    *, lesson: Lesson, actor: str, reason: str = "", now: datetime | None = None
) -> Lesson:
    """A person brings a retired lesson back (at least at the retirement floor)."""
    now = now or timezone.now()
    lesson = _lock_current(lesson)
    if lesson.state != LessonState.RETIRED:
        return lesson
    has_evidence = LessonEvidence.objects.filter(lesson=lesson, relation=_SUPPORTS).exists()
    lesson.state = LessonState.ACTIVE if has_evidence else LessonState.CLAIMED
    lesson.retired_by = ""
    lesson.retired_reason = ""
    lesson.retired_at = None
    lesson.last_used_at = now
    lesson.save(
        update_fields=[
            "state",
            "retired_by",
            "retired_reason",
            "retired_at",
            "last_used_at",
            "updated_at",
        ]
    )
    if lesson.confidence < settings.CAIRN_LESSON_RETIRE_BELOW:
        confidence_apply(
            target=lesson,
            new=settings.CAIRN_LESSON_RETIRE_BELOW,
            cause=ConfidenceCause.PERSON,
            kind="restore",
            at=now,
        )
    audit_record(
        workspace=lesson.workspace,
        actor=actor,
        action="lesson.restore",
        target_type="lesson",
        target_id=lesson.pk,
        reason=reason,
    )
    return lesson


def _flag_set(*, lesson: Lesson, flag: str, value: bool, actor: str, reason: str) -> Lesson:
    verb = {"pinned": "pin", "sealed": "seal"}[flag]
    lesson = _lock_current(lesson)
    if getattr(lesson, flag) == value:
        return lesson
    if value and lesson.state == LessonState.RETIRED:
        raise ApplicationError(
            f"Lesson {lesson.pk} is retired; restore it before you {verb} it.",
            code="retired",
            fields={"id": ["retired"]},
        )
    setattr(lesson, flag, value)
    lesson.save(update_fields=[flag, "updated_at"])
    audit_record(
        workspace=lesson.workspace,
        actor=actor,
        action=f"lesson.{verb if value else 'un' + verb}",
        target_type="lesson",
        target_id=lesson.pk,
        reason=reason,
    )
    return lesson


@transaction.atomic
def lesson_pin(*, lesson: Lesson, pinned: bool, actor: str, reason: str = "") -> Lesson:
    """A person pins (or unpins) the current row: pinned lessons never decay, are never
    retired by the cap or by falling below the floor."""
    return _flag_set(lesson=lesson, flag="pinned", value=pinned, actor=actor, reason=reason)


@transaction.atomic
def lesson_seal(*, lesson: Lesson, sealed: bool, actor: str, reason: str = "") -> Lesson:
    """A person seals (or unseals) the current row: agents can then neither edit nor
    retire it, and their reports never push it below the recall floor."""
    return _flag_set(lesson=lesson, flag="sealed", value=sealed, actor=actor, reason=reason)


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
