"""Situation events: every decision the recovery state makes, with the steps and
seconds since its blocker was detected. Never any tool output."""

from __future__ import annotations

from datetime import datetime

from memory.models import SituationEvent, SituationLesson, TurnRecovery


def since_detect(
    blocker: dict | None, *, step: int, now: datetime
) -> tuple[int | None, float | None]:
    if not blocker:
        return None, None
    detected = datetime.fromisoformat(blocker["detected_at"])
    return step - blocker["detected_step"], max((now - detected).total_seconds(), 0.0)


def event_record(
    *,
    turn: TurnRecovery | None,
    event: str,
    now: datetime,
    step: int,
    blocker: dict | None = None,
    kind: str = "",
    subject: str = "",
    source: str = "",
    tool: str = "",
    lesson: SituationLesson | None = None,
    details: dict | None = None,
    workspace_id: int | None = None,
    agent_id: int | None = None,
    session_id: str = "",
    channel: str = "",
) -> SituationEvent:
    """Record one decision; without a turn (a bare declaration) name the agent instead."""
    steps, seconds = since_detect(blocker, step=step, now=now)
    return SituationEvent.objects.create(
        workspace_id=turn.workspace_id if turn else workspace_id,
        agent_id=turn.agent_id if turn else agent_id,
        turn=turn,
        lesson=lesson,
        session_id=turn.session_id if turn else session_id,
        event=event,
        kind=kind or (blocker or {}).get("kind", ""),
        subject=subject or (blocker or {}).get("subject", ""),
        source=source or (blocker or {}).get("source", ""),
        tool=tool[:200],
        step=step,
        steps_since_detect=steps,
        seconds_since_detect=None if seconds is None else round(seconds, 3),
        details=details or {},
        channel=turn.channel if turn else channel,
    )
