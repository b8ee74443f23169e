"""The one place a lesson changes state by someone's decision: edit (a new row
that supersedes the old), retire, restore, pin and seal, and the supersede and
row-lock helpers every lesson writer shares. Retirement at the confidence floor
is a consequence of a confidence move and lives with it in ``evidence.py``."""

from __future__ import annotations

import re
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.actors import Actor, actor_require_person
from memory.core.audit import audit_record
from memory.core.secrets import refuse_secrets
from memory.lessons.evidence import confidence_apply
from memory.lessons.selectors import lesson_ancestors
from memory.models import (
    Agent,
    Channel,
    ConfidenceCause,
    Lesson,
    LessonEvidence,
    LessonScope,
    LessonSource,
    LessonState,
    RetiredBy,
    SupersedeReason,
    Workspace,
)
from memory.webhooks.events import lesson_retired_event


def lesson_supersede(old: Lesson, *, by: Lesson, reason: str) -> None:
    """Point ``old`` at the row that replaces it; the row itself is kept (principle 4)."""
    old.superseded_by = by
    old.supersede_reason = reason
    old.save(update_fields=["superseded_by", "supersede_reason", "updated_at"])


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


def lesson_text_normalize(text: str) -> str:
    """Equivalent text: case, whitespace and punctuation do not matter."""
    return " ".join(re.findall(r"\w+", text.casefold()))[:MECHANICAL_TEXT_MAX_CHARS]


def lesson_text_clean(text: str, *, max_chars: int) -> str:
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


def operation_key_clean(operation_key: str) -> str:
    cleaned = str(operation_key).strip()
    if not cleaned or len(cleaned) > 200:
        raise ApplicationError(
            "operation_key must be 1-200 characters.",
            code="invalid",
            fields={"operation_key": ["1-200 characters"]},
            status_code=400,
        )
    return cleaned


def retired_by_person_blocking(
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
        evidence__relation__in=[RELATION_SUPPORTS, LessonEvidence.Relation.CITED],
    ).distinct()
    for lesson in retired:
        lineage = [lesson, *lesson_ancestors(lesson=lesson)]
        if any(
            row.operation_key == operation_key and row.normalized_text == normalized_text
            for row in lineage
        ):
            return lesson
    return None


@transaction.atomic
def lesson_edit(
    *,
    lesson: Lesson,
    actor: Actor,
    text: str | None = None,
    operation_key: str | None = None,
    reason: str = "",
) -> Lesson:
    """Edit = a new row; the old row points at it.

    Evidence and confidence were earned by the old words. A person is a trusted
    channel: their edit keeps both (and the state, pin and seal), as the reviewer
    vouches for the new words. Anyone else's (an agent token's, or its harness's:
    the text is the model's either way) starts claimed at the claimed confidence,
    with no evidence and no pin, and is served only once a harness outcome that
    had the new version in play confirms it.
    """
    by_person = actor.is_person
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
        lesson_text_clean(text, max_chars=settings.CAIRN_LESSON_TEXT_MAX_CHARS)
        if text is not None
        else lesson.text
    )
    new_op = (
        operation_key_clean(operation_key) if operation_key is not None else lesson.operation_key
    )
    if new_op != lesson.operation_key:
        # Evidence and confidence were earned on this operation; they do not carry over.
        raise ApplicationError(
            f"Lesson {lesson.pk} is about {lesson.operation_key!r}; its operation cannot "
            "change. A lesson about another operation is a new lesson: post it with its "
            "own evidence.",
            code="operation_change",
            fields={"operation_key": ["a lesson's operation cannot change"]},
        )
    if new_text == lesson.text and new_op == lesson.operation_key:
        return lesson
    if by_person:
        confidence, state, pinned = lesson.confidence, lesson.state, lesson.pinned
    else:
        confidence, state, pinned = (
            min(lesson.confidence, settings.CAIRN_LESSON_CLAIMED_CONFIDENCE),
            LessonState.CLAIMED,
            False,
        )
    edited = Lesson.objects.create(
        workspace_id=lesson.workspace_id,
        agent=actor.agent or lesson.agent,
        text=new_text,
        normalized_text=lesson_text_normalize(new_text),
        operation_key=new_op,
        rationale=lesson.rationale,
        avoid_operation_key=lesson.avoid_operation_key if new_op == lesson.operation_key else "",
        target=lesson.target if new_op == lesson.operation_key else "",
        scope=lesson.scope,
        project_digest=lesson.project_digest,
        confidence=confidence,
        birth_confidence=confidence,
        state=state,
        source=LessonSource.USER if by_person else lesson.source,
        channel=actor.channel,
        pinned=pinned,
        sealed=lesson.sealed,
        use_count=lesson.use_count,
        last_used_at=lesson.last_used_at,
    )
    if by_person:
        lesson_evidence_copy(source=lesson, target=edited)
    lesson_supersede(lesson, by=edited, reason=SupersedeReason.EDITED)
    audit_record(
        workspace=lesson.workspace,
        actor=actor.label,
        action="lesson.edit",
        target_type="lesson",
        target_id=lesson.pk,
        reason=reason,
        details={"new_id": edited.pk, "state": edited.state},
    )
    return edited


@transaction.atomic
def lesson_retire(
    *,
    lesson: Lesson,
    actor: Actor,
    reason: str = "",
    now: datetime | None = None,
) -> Lesson:
    """Forget = retire (the row stays as history). A person's retirement also means the
    lesson is never re-learned from the same evidence ids."""
    by_person = actor.is_person
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
        actor=actor.label,
        action="lesson.retire",
        target_type="lesson",
        target_id=lesson.pk,
        reason=reason,
        details={"by": lesson.retired_by},
    )
    lesson_retired_event(lesson=lesson, retired_by=lesson.retired_by)
    return lesson


@transaction.atomic
def lesson_restore(
    *, lesson: Lesson, actor: Actor, reason: str = "", now: datetime | None = None
) -> Lesson:
    """A person brings a retired lesson back (at least at the retirement floor)."""
    actor_require_person(actor, action="restore a lesson")
    now = now or timezone.now()
    lesson = _lock_current(lesson)
    if lesson.state != LessonState.RETIRED:
        return lesson
    has_evidence = LessonEvidence.objects.filter(lesson=lesson, relation=RELATION_SUPPORTS).exists()
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
            channel=Channel.PERSON,
            at=now,
        )
    audit_record(
        workspace=lesson.workspace,
        actor=actor.label,
        action="lesson.restore",
        target_type="lesson",
        target_id=lesson.pk,
        reason=reason,
    )
    return lesson


def _flag_set(*, lesson: Lesson, flag: str, value: bool, actor: Actor, reason: str) -> Lesson:
    verb = {"pinned": "pin", "sealed": "seal"}[flag]
    actor_require_person(actor, action=f"{verb} a lesson")
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
        actor=actor.label,
        action=f"lesson.{verb if value else 'un' + verb}",
        target_type="lesson",
        target_id=lesson.pk,
        reason=reason,
    )
    return lesson


@transaction.atomic
def lesson_pin(*, lesson: Lesson, pinned: bool, actor: Actor, reason: str = "") -> Lesson:
    """A person pins (or unpins) the current row: pinned lessons never decay, are never
    retired by the cap or by falling below the floor."""
    return _flag_set(lesson=lesson, flag="pinned", value=pinned, actor=actor, reason=reason)


@transaction.atomic
def lesson_seal(*, lesson: Lesson, sealed: bool, actor: Actor, reason: str = "") -> Lesson:
    """A person seals (or unseals) the current row: agents can then neither edit nor
    retire it, and their reports never push it below the recall floor."""
    return _flag_set(lesson=lesson, flag="sealed", value=sealed, actor=actor, reason=reason)


MECHANICAL_TEXT_MAX_CHARS = 500


RELATION_SUPPORTS = LessonEvidence.Relation.SUPPORTS


def agent_actor_label(agent: Agent | None) -> str:
    return f"agent:{agent.name}" if agent else "system"


def lesson_evidence_copy(
    *, source: Lesson, target: Lesson, only_project: str | None = None
) -> None:
    rows = LessonEvidence.objects.filter(lesson=source).select_related("outcome")
    if only_project is not None:
        rows = rows.filter(outcome__project_digest=only_project)
    for row in rows:
        LessonEvidence.objects.get_or_create(
            lesson=target, outcome=row.outcome, defaults={"relation": row.relation}
        )


def current_lessons(workspace: Workspace):
    return Lesson.objects.filter(workspace=workspace, superseded_by__isnull=True).exclude(
        state=LessonState.RETIRED
    )


def current_equivalent(
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
