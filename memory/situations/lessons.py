"""Situation lessons: a remembered blocker on one machine (SPEC section 5).

Written only here, only by the recovery state, from a *declared* blocker that
came through a *harness* token, after the turn escalated or the user answered.
Never from inferred situations, never for transient kinds (offline, quota,
locked), never from a turn result the classifier flagged as adversarial.

A lesson is keyed by its signature (tool, subject, kind, env fingerprint) and
lives until it expires (auth 7 days, not_installed 30 days), a clean probe or a
successful call on its subject reported by the harness supersedes it, or a
reviewer removes it. Ended
lessons are kept with the reason.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.db import transaction
from django.db.models import QuerySet

from memory.core.actors import Actor, actor_require_role
from memory.core.audit import audit_record
from memory.core.locks import advisory_xact_lock
from memory.core.trust import channel_weighs
from memory.models import (
    LessonEndReason,
    SituationLesson,
    SituationLessonState,
    TurnRecovery,
    Workspace,
)
from memory.situations.taxonomy import LESSON_CONFIDENCE, LESSON_TTL, NEVER_PERSISTED


def signature_digest(*, tool: str, subject: str, kind: str, env: str) -> str:
    raw = "\x1f".join([tool, subject, kind, env])
    return hashlib.sha256(raw.encode()).hexdigest()


def lesson_content(blocker: dict) -> str:
    detail = (blocker.get("detail") or "").strip() or f"{blocker['kind']} blocker"
    text = f"{blocker['subject']}: {detail}"
    if blocker.get("unblock"):
        text += f" Unblock: {blocker['unblock']}"
    return text[:1000]


def live_lessons(*, workspace: Workspace, machine: str, now: datetime) -> QuerySet:
    return SituationLesson.objects.filter(
        workspace=workspace,
        machine_digest=machine,
        state=SituationLessonState.ACTIVE,
        expires_at__gt=now,
    )


def lesson_matching(
    *, workspace: Workspace, machine: str, subject: str, kind: str, env: str, now: datetime
) -> SituationLesson | None:
    """The live lesson for this blocker, or None. A lesson whose env fingerprint differs
    from the one declared now (the binary moved, a new version) is ignored."""
    if not machine:
        return None
    lesson = (
        live_lessons(workspace=workspace, machine=machine, now=now)
        .filter(subject=subject, kind=kind)
        .first()
    )
    if lesson is None or (lesson.env and env and lesson.env != env):
        return None
    return lesson


def lesson_store(*, turn: TurnRecovery, blocker: dict, now: datetime) -> SituationLesson | None:
    """Store (or re-detect) the lesson for one declared blocker; None when it may not be."""
    if (
        blocker.get("source") != "declared"
        or blocker["kind"] in NEVER_PERSISTED
        or blocker["kind"] not in LESSON_TTL
        or blocker.get("tainted")
        or not blocker.get("harness")
        or not turn.machine_digest
    ):
        return None
    signature = signature_digest(
        tool=blocker["tool"], subject=blocker["subject"], kind=blocker["kind"], env=blocker["env"]
    )
    # One active lesson per machine, subject and kind (a unique index): turns on the
    # same machine escalating or answered at once take turns here, so the second sees
    # the first's lesson instead of failing on the index.
    advisory_xact_lock(
        f"situation_lesson:{turn.workspace_id}:{turn.machine_digest}:"
        f"{blocker['subject']}:{blocker['kind']}"
    )
    current = (
        SituationLesson.objects.select_for_update()
        .filter(
            workspace_id=turn.workspace_id,
            machine_digest=turn.machine_digest,
            subject=blocker["subject"],
            kind=blocker["kind"],
            state=SituationLessonState.ACTIVE,
        )
        .first()
    )
    if current is not None and current.signature == signature and current.expires_at > now:
        return current
    if current is not None:
        _end(current, reason=LessonEndReason.REDETECTED, now=now)
    lesson = SituationLesson.objects.create(
        workspace_id=turn.workspace_id,
        agent_id=turn.agent_id,
        turn=turn,
        machine_digest=turn.machine_digest,
        context=f"machine:{turn.machine_digest}",
        tool=blocker["tool"],
        subject=blocker["subject"],
        kind=blocker["kind"],
        env=blocker["env"],
        signature=signature,
        content=lesson_content(blocker),
        detail=blocker.get("detail", ""),
        unblock=blocker.get("unblock", ""),
        probe=blocker.get("probe"),
        interactive=bool(blocker.get("interactive")),
        confidence=LESSON_CONFIDENCE,
        detected_at=datetime.fromisoformat(blocker["detected_at"]),
        expires_at=now + LESSON_TTL[blocker["kind"]],
    )
    if current is not None:
        current.superseded_by = lesson
        current.save(update_fields=["superseded_by"])
    audit_record(
        workspace=turn.workspace,
        actor=f"system:situations ({turn.channel}:{turn.agent_id})",
        action="situation_lesson.store",
        target_type="situation_lesson",
        target_id=lesson.pk,
        details={"kind": lesson.kind, "signature": signature, "turn": turn.pk},
    )
    return lesson


def _end(lesson: SituationLesson, *, reason: str, now: datetime) -> None:
    state = (
        SituationLessonState.REMOVED
        if reason == LessonEndReason.REMOVED
        else SituationLessonState.SUPERSEDED
    )
    lesson.state = state
    lesson.end_reason = reason
    lesson.ended_at = now
    lesson.save(update_fields=["state", "end_reason", "ended_at"])


def lessons_invalidate(
    *, turn: TurnRecovery, subject: str, reason: str, now: datetime, reporter: Actor
) -> list[SituationLesson]:
    """A clean probe or a successful call on ``subject``: its live lessons on this
    machine are superseded (kept, with the reason).

    Only when the harness (or a person) reported it: lessons are stored from the
    harness's reports alone, and a success posted with an agent token is the model's
    own word, which must not end what the harness saw (it still closes the turn's
    own blocker, which is the model's business)."""
    if not turn.machine_digest or not channel_weighs(reporter.channel):
        return []
    ended = list(
        SituationLesson.objects.select_for_update().filter(
            workspace_id=turn.workspace_id,
            machine_digest=turn.machine_digest,
            subject=subject,
            state=SituationLessonState.ACTIVE,
        )
    )
    for lesson in ended:
        _end(lesson, reason=reason, now=now)
        audit_record(
            workspace=turn.workspace,
            actor=f"system:situations ({turn.channel}:{turn.agent_id})",
            action="situation_lesson.invalidate",
            target_type="situation_lesson",
            target_id=lesson.pk,
            reason=reason,
            details={"turn": turn.pk},
        )
    return ended


def lesson_mark_applied(*, lesson: SituationLesson) -> None:
    SituationLesson.objects.filter(pk=lesson.pk).update(applied_count=lesson.applied_count + 1)


@transaction.atomic
def situation_lesson_remove(
    *, actor: Actor, workspace: Workspace, lesson_id: int, now: datetime, reason: str = ""
) -> SituationLesson:
    """A reviewer removes a known blocker: it stops being served, the row is kept."""
    actor_require_role(actor, workspace=workspace, action="remove a known blocker")
    lesson = SituationLesson.objects.select_for_update().get(pk=lesson_id, workspace=workspace)
    if lesson.state == SituationLessonState.ACTIVE:
        _end(lesson, reason=LessonEndReason.REMOVED, now=now)
        audit_record(
            workspace=workspace,
            actor=actor.label,
            action="situation_lesson.remove",
            target_type="situation_lesson",
            target_id=lesson.pk,
            reason=reason,
        )
    return lesson
