"""Reads: known blockers for a machine, a turn's situations, dashboard counts."""

from __future__ import annotations

import re
import statistics
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Q, QuerySet, Sum

from memory.models import (
    Agent,
    SituationEvent,
    SituationLesson,
    SituationLessonState,
    TurnRecovery,
    Workspace,
)
from memory.situations.escalation import cost_line
from memory.situations.lessons import live_lessons

KNOWN_MAX = settings.CAIRN_SITUATION_KNOWN_MAX
KNOWN_HEADING = "Known blockers on this machine:"
_OPERATION_HEAD = re.compile(r"[:/\s.]")


def known_blockers(
    *,
    workspace: Workspace,
    machine: str,
    now: datetime,
    subjects: list[str] | None = None,
    limit: int = KNOWN_MAX,
) -> list[SituationLesson]:
    """At most ``limit`` live situation lessons for ``machine``, newest detection first,
    limited to ``subjects`` (those of the skills in use) when given."""
    if not machine:
        return []
    qs = live_lessons(workspace=workspace, machine=machine, now=now)
    if subjects is not None:
        qs = qs.filter(subject__in=subjects)
    return list(qs.order_by("-detected_at", "-id")[:limit])


def operation_subjects(operation_key: str) -> list[str]:
    """The subjects an operation key may be about: itself and its head
    (``gh:pr-list`` → ``gh``, ``shell/gh`` → ``shell``)."""
    head = _OPERATION_HEAD.split(operation_key, maxsplit=1)[0]
    return sorted({operation_key, head} - {""})


def blocker_json(lesson: SituationLesson) -> dict:
    return {
        "id": lesson.pk,
        "subject": lesson.subject,
        "kind": lesson.kind,
        "tool": lesson.tool,
        "content": lesson.content,
        "unblock": lesson.unblock,
        "probe": lesson.probe,
        "interactive": lesson.interactive,
        "confidence": lesson.confidence,
        "signature": lesson.signature,
        "env": lesson.env,
        "detected_at": lesson.detected_at.isoformat(),
        "expires_at": lesson.expires_at.isoformat(),
    }


def blocker_line(lesson: SituationLesson) -> str:
    return f"- {lesson.content}"


def known_blockers_text(lessons: list[SituationLesson]) -> str:
    if not lessons:
        return ""
    return "\n".join([KNOWN_HEADING, *(blocker_line(lesson) for lesson in lessons)])


LESSON_REVIEW_ORDER = ("-detected_at", "-id")


def lessons_for_review(
    *, workspace: Workspace, now: datetime, machine: str = "", live: bool = True
) -> QuerySet:
    """Situation lessons for the "Known blockers" page: live ones by default."""
    qs = SituationLesson.objects.filter(workspace=workspace).select_related("agent")
    if live:
        qs = qs.filter(state=SituationLessonState.ACTIVE, expires_at__gt=now)
    if machine:
        qs = qs.filter(machine_digest=machine)
    return qs


def lesson_machines(*, workspace: Workspace) -> list[str]:
    return list(
        SituationLesson.objects.filter(workspace=workspace)
        .order_by("machine_digest")
        .values_list("machine_digest", flat=True)
        .distinct()
    )


def lesson_get(*, workspace: Workspace, pk: int) -> SituationLesson | None:
    return SituationLesson.objects.filter(workspace=workspace, pk=pk).first()


def turns_for_outcome(*, agent: Agent, outcome_id: str) -> list[TurnRecovery]:
    """The recovery state posted under the outcome's own id (``turn_id = outcome_id``)."""
    return list(
        TurnRecovery.objects.filter(agent=agent, turn_id=outcome_id)
        .prefetch_related("events")
        .order_by("created_at", "id")
    )


def turn_cost_line(turn: TurnRecovery) -> str:
    """'12 steps · 94 s after gh was blocked, before asking', for an escalated turn."""
    if not turn.escalated:
        return ""
    escalated = turn.events.filter(event="escalated").order_by("id").first()
    subject = escalated.subject if escalated else (turn.escalation or {}).get("subject", "?")
    return cost_line(
        subject=subject, steps=turn.steps_to_escalate, seconds=turn.seconds_to_escalate
    )


def turn_events(turn: TurnRecovery) -> QuerySet:
    return SituationEvent.objects.filter(turn=turn).order_by("id")


def situation_counts(*, workspace: Workspace, now: datetime, days: int = 30) -> dict:
    """Dashboard counts over the last ``days``: turns with posted results, blocked
    (escalated) turns, median steps to escalate, known blockers, adversarial results."""
    since = now - timedelta(days=days)
    turns = TurnRecovery.objects.filter(workspace=workspace, created_at__gte=since)
    totals = turns.aggregate(
        turns=Count("id"),
        blocked=Count("id", filter=Q(escalated=True)),
        adversarial=Sum("adversarial_results"),
    )
    steps = list(
        turns.filter(escalated=True, steps_to_escalate__isnull=False).values_list(
            "steps_to_escalate", flat=True
        )
    )
    return {
        "days": days,
        "turns": totals["turns"],
        "blocked_turns": totals["blocked"],
        "median_steps_to_escalate": statistics.median(steps) if steps else None,
        "known_blockers": live_lessons_count(workspace=workspace, now=now),
        "adversarial_results": totals["adversarial"] or 0,
    }


def live_lessons_count(*, workspace: Workspace, now: datetime) -> int:
    return SituationLesson.objects.filter(
        workspace=workspace, state=SituationLessonState.ACTIVE, expires_at__gt=now
    ).count()
