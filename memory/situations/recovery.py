"""Per-turn recovery state (SPEC section 5): the workaround budget after a blocker.

The harness posts every tool result of a turn; the answer says what the loop may
do next: ``continue``, ``escalate`` (stop dispatching, ask the person) or
``refuse`` (do not run this interactive tool: nobody is there to answer it).

Rules, in the order :func:`turn_result_record` applies them:

1. An interactive tool called while unattended is refused before dispatch; the
   refusal counts against every open blocker (and opens a ``permission``
   blocker on the tool when none is open).
2. A blocker (declared by the tool, or inferred from generic signals) opens on
   its subject S. Each *further* call that fails, is refused, or reports the
   same kind counts against S. Successes and probes never count.
3. More than 2 counts (declared) or 4 (inferred) escalates. So does a declared
   blocker that matches a live situation lesson for this machine: the lesson
   makes the agent ask sooner (0 wasted steps), it never skips anything.
4. A blocker closes on a clean probe, a successful call on S, or a user answer,
   and its count resets. A clean probe or a success also supersedes S's lessons.
   A blocker the harness reported closes only on the harness's (or a person's)
   word, never on a post made with the agent token.
5. Lessons are stored from declared blockers reported by a harness token, when
   the turn escalates or the user answers (:mod:`memory.situations.lessons`).
6. A result the classifier flags as ``injected_instruction`` is counted like any
   other call but feeds no learning: it closes nothing, invalidates nothing and
   its blockers are never stored.

Posts for one turn serialize on the turn's row (``SELECT ... FOR UPDATE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, connection, transaction

from memory.core.actors import Actor
from memory.models import LessonEndReason, SituationEventKind, TurnAction, TurnRecovery
from memory.situations.classify import Signals, classify_result
from memory.situations.escalation import escalation_build
from memory.situations.events import event_record, since_detect
from memory.situations.lessons import (
    lesson_mark_applied,
    lesson_matching,
    lesson_store,
    lessons_invalidate,
)
from memory.situations.taxonomy import (
    BLOCKER,
    BUDGET,
    INFERRED,
    KINDS,
    Situation,
)

E = SituationEventKind


@dataclass(frozen=True)
class TurnResult:
    """One tool result of a turn, as the harness saw it."""

    tool: str = ""
    ok: bool | None = None
    situation: Situation | None = None  # declared, already validated
    signals: Signals | None = None
    subject: str = ""  # what the call was on; default: the situation's subject or the tool
    probe: bool = False
    interactive: bool = False
    attended: bool = True
    user_answered: bool = False
    machine: str = ""
    session_id: str = ""


def _commit_async() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit TO OFF")


def _commit_durably() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit TO ON")


def _turn_locked(*, actor: Actor, turn_id: str, result: TurnResult) -> TurnRecovery:
    agent = actor.agent
    lookup = {"workspace_id": agent.workspace_id, "agent": agent, "turn_id": turn_id}
    turn = TurnRecovery.objects.select_for_update().filter(**lookup).first()
    if turn is None:
        try:
            with transaction.atomic():
                TurnRecovery.objects.create(
                    session_id=result.session_id,
                    machine_digest=result.machine,
                    channel=actor.channel,
                    **lookup,
                )
        except IntegrityError:
            pass  # a concurrent post for the same turn created it first
        turn = TurnRecovery.objects.select_for_update().get(**lookup)
    if result.machine and not turn.machine_digest:
        turn.machine_digest = result.machine
    if result.session_id and not turn.session_id:
        turn.session_id = result.session_id
    return turn


def _blocker_json(situation: Situation, *, tool: str, step: int, now: datetime, harness: bool):
    return {
        "kind": situation.kind,
        "subject": situation.subject,
        "source": situation.source,
        "tool": tool,
        "rule": situation.rule,
        "unblock": situation.unblock,
        "probe": situation.probe,
        "interactive": situation.interactive,
        "detail": situation.detail,
        "env": situation.env,
        "count": 0,
        "budget": BUDGET[situation.source],
        "detected_step": step,
        "detected_at": now.isoformat(),
        "harness": harness,
        "tainted": False,
        "lesson_id": None,
    }


def _public_blocker(blocker: dict) -> dict:
    body = {
        "subject": blocker["subject"],
        "kind": blocker["kind"],
        "class": KINDS[blocker["kind"]],
        "source": blocker["source"],
        "count": blocker["count"],
        "budget": blocker["budget"],
        "budget_left": max(blocker["budget"] - blocker["count"], 0),
        "interactive": blocker["interactive"],
        "detected_step": blocker["detected_step"],
        "lesson_id": blocker["lesson_id"],
    }
    if blocker["source"] != INFERRED:
        body["unblock"] = blocker["unblock"]
        body["probe"] = blocker["probe"]
    return body


def _closes(blocker: dict, *, subject: str, tool: str, probe: bool) -> bool:
    if blocker["subject"] in (subject, tool):
        return True
    return probe and bool(blocker.get("probe")) and blocker["probe"]["tool"] == tool


def _may_close(actor: Actor, blocker: dict) -> bool:
    """A blocker the harness saw closes only on the harness's (or a person's) word: an
    agent token's success, probe or "the user answered" is the model's own claim, and
    must not lift an escalation the harness raised."""
    return not blocker.get("harness") or actor.weighs


def _situation_of(result: TurnResult) -> tuple[Situation | None, bool]:
    """(the result's situation, whether its content was adversarial)."""
    inferred = classify_result(result.signals) if result.signals else None
    adversarial = inferred is not None and inferred.is_adversarial
    if result.situation is not None:
        return result.situation, adversarial or result.situation.is_adversarial
    return inferred, adversarial


def _signals_succeeded(signals: Signals | None) -> bool:
    if signals is None or signals.failed:
        return False
    return signals.exit_code == 0 or (
        signals.http_status is not None and 200 <= signals.http_status < 400
    )


@transaction.atomic
def turn_result_record(*, actor: Actor, turn_id: str, result: TurnResult, now: datetime) -> dict:
    """Apply one tool result to the turn's recovery state and say what the loop may do.

    Answers ``{action, open_blockers, budget_left, escalation, situation, step}``.

    The turn's counters are on the agent's hot path and only matter within the turn,
    so their commit does not wait for the WAL flush (``synchronous_commit = off``:
    a crash may lose the last few hundred milliseconds of counts, never corrupts
    them). A transaction that writes or ends a lesson commits durably as usual.
    """
    _commit_async()
    turn = _turn_locked(actor=actor, turn_id=turn_id, result=result)
    blockers: dict[str, dict] = dict(turn.blockers or {})
    if result.user_answered:
        return _user_answered(turn, blockers, now=now, actor=actor)

    turn.steps += 1
    step = turn.steps
    tool = result.tool
    refused = result.interactive and not result.attended
    situation, adversarial = _situation_of(result)
    if refused and not blockers:
        situation = Situation(
            kind="permission",
            subject=tool,
            source=INFERRED,
            interactive=True,
            rule="interactive_unattended",
        )
    if adversarial:
        turn.adversarial_results += 1
        event_record(
            turn=turn, event=E.DETECTED, now=now, step=step, kind="injected_instruction",
            subject=tool, source=INFERRED, tool=tool, details={"learnable": False},
        )  # fmt: skip
    is_blocker = situation is not None and KINDS[situation.kind] == BLOCKER
    failed = (
        refused
        or result.ok is False
        or is_blocker
        or (result.signals is not None and result.signals.failed)
    )
    # Only a result that says it worked closes anything: a post with neither ``ok`` nor
    # an exit code or HTTP status is neither a workaround nor a success.
    succeeded = not failed and (result.ok is True or _signals_succeeded(result.signals))
    subject = result.subject or (situation.subject if situation else "") or tool
    if refused:
        turn.refused_calls += 1
        event_record(
            turn=turn, event=E.INTERACTIVE_REFUSED, now=now, step=step, kind="permission",
            subject=tool, source=INFERRED, tool=tool, details={"reason": "unattended"},
        )  # fmt: skip

    escalate_for: tuple[dict, int | None] | None = None
    opened = None
    # Rule 4: a clean probe or a success closes S (adversarial content closes nothing).
    if succeeded and not adversarial:
        for key, blocker in list(blockers.items()):
            if not _may_close(actor, blocker):
                continue
            if _closes(blocker, subject=subject, tool=tool, probe=result.probe):
                event_record(
                    turn=turn, event=E.CLOSED, now=now, step=step, blocker=blocker, tool=tool,
                    details={"trigger": "probe_clear" if result.probe else "success"},
                )  # fmt: skip
                del blockers[key]
        reason = LessonEndReason.PROBE_CLEAR if result.probe else LessonEndReason.SUCCESS
        ended = lessons_invalidate(
            turn=turn, subject=subject, reason=reason, now=now, reporter=actor
        )
        if ended:
            _commit_durably()
        for lesson in ended:
            event_record(
                turn=turn, event=E.LESSON_INVALIDATED, now=now, step=step, kind=lesson.kind,
                subject=lesson.subject, source="declared", tool=tool, lesson=lesson,
                details={"trigger": str(reason), "signature": lesson.signature},
            )  # fmt: skip
    # Rule 2: open the blocker this result reports.
    if is_blocker and situation.subject not in blockers:
        opened = _blocker_json(situation, tool=tool, step=step, now=now, harness=actor.is_harness)
        opened["tainted"] = adversarial
        blockers[situation.subject] = opened
        event_record(
            turn=turn, event=E.DETECTED, now=now, step=step, blocker=opened, tool=tool,
            details={"probe": result.probe, "rule": situation.rule},
        )  # fmt: skip
        if situation.source != INFERRED:
            lesson = lesson_matching(
                workspace=turn.workspace, machine=turn.machine_digest, subject=situation.subject,
                kind=situation.kind, env=situation.env, now=now,
            )  # fmt: skip
            if lesson is not None:
                opened["lesson_id"] = lesson.pk
                lesson_mark_applied(lesson=lesson)
                event_record(
                    turn=turn, event=E.LESSON_APPLIED, now=now, step=step, blocker=opened,
                    tool=tool, lesson=lesson, details={"signature": lesson.signature},
                )  # fmt: skip
                escalate_for = (opened, lesson.pk)
    # Rule 2: a further failed, refused or same-kind call counts; probes never do.
    counted = False
    if not result.probe:
        for blocker in blockers.values():
            if blocker is opened:
                continue
            if failed or (situation is not None and situation.kind == blocker["kind"]):
                blocker["count"] += 1
                counted = True
                if adversarial:
                    blocker["tainted"] = blocker["tainted"] or blocker["subject"] == subject
                event_record(
                    turn=turn, event=E.WORKAROUND, now=now, step=step, blocker=blocker,
                    tool=tool, details={
                        "count": blocker["count"], "budget": blocker["budget"],
                        "outcome": "refused" if refused else "failed",
                    },
                )  # fmt: skip
                if blocker["count"] > blocker["budget"] and escalate_for is None:
                    escalate_for = (blocker, blocker["lesson_id"])
    if counted:
        turn.workaround_calls += 1
    # Rule 3: escalate (once per open escalation; later posts repeat it).
    if escalate_for is not None and turn.escalation is None:
        _escalate(turn, blockers, escalate_for, step=step, now=now, tool=tool)
    if not blockers:
        turn.escalation = None
    turn.blockers = blockers
    turn.save()
    if turn.escalation is not None:
        action = TurnAction.ESCALATE
    elif refused:
        action = TurnAction.REFUSE
    else:
        action = TurnAction.CONTINUE
    return _answer(turn, blockers, action=action, situation=situation, adversarial=adversarial)


def _escalate(turn, blockers, escalate_for, *, step: int, now: datetime, tool: str) -> None:
    blocker, lesson_id = escalate_for
    steps, seconds = since_detect(blocker, step=step, now=now)
    turn.escalation = escalation_build(
        blocker, steps_since_detect=steps, seconds_since_detect=seconds, lesson_id=lesson_id
    )
    if not turn.escalated:
        turn.escalated = True
        turn.steps_to_escalate = steps
        turn.seconds_to_escalate = round(seconds, 3)
    event_record(
        turn=turn, event=E.ESCALATED, now=now, step=step, blocker=blocker, tool=tool,
        details={"lesson_id": lesson_id, "channel": "turn_result"},
    )  # fmt: skip
    _store_lessons(turn, blockers, step=step, now=now)


def _store_lessons(turn, blockers, *, step: int, now: datetime) -> None:
    # In subject order: each store takes a lock per subject, and two turns taking
    # the same locks in different orders would deadlock.
    for _, blocker in sorted(blockers.items()):
        if blocker["lesson_id"]:
            continue
        lesson = lesson_store(turn=turn, blocker=blocker, now=now)
        if lesson is not None:
            _commit_durably()
            blocker["lesson_id"] = lesson.pk
            event_record(
                turn=turn, event=E.LESSON_STORED, now=now, step=step, blocker=blocker,
                tool=blocker["tool"], lesson=lesson, details={"signature": lesson.signature},
            )  # fmt: skip


def _user_answered(turn: TurnRecovery, blockers: dict, *, now: datetime, actor: Actor) -> dict:
    """The person answered: lessons are stored for the declared blockers, all close.

    Posted with an agent token, it closes only the blockers the agent itself reported
    (see :func:`_may_close`); the escalation stays while any harness blocker is open."""
    step = turn.steps
    closing = {key: b for key, b in blockers.items() if _may_close(actor, b)}
    _store_lessons(turn, closing, step=step, now=now)
    for blocker in closing.values():
        event_record(
            turn=turn, event=E.CLOSED, now=now, step=step, blocker=blocker,
            details={"trigger": "user_answered"},
        )  # fmt: skip
    remaining = {key: b for key, b in blockers.items() if key not in closing}
    turn.blockers = remaining
    if not remaining:
        turn.escalation = None
    turn.save()
    action = TurnAction.ESCALATE if turn.escalation is not None else TurnAction.CONTINUE
    return _answer(turn, remaining, action=action, situation=None, adversarial=False)


def _answer(turn, blockers, *, action, situation, adversarial) -> dict:
    open_blockers = [_public_blocker(b) for b in blockers.values()]
    budget_left = min((b["budget_left"] for b in open_blockers), default=None)
    return {
        "turn_id": turn.turn_id,
        "step": turn.steps,
        "action": str(action),
        "open_blockers": open_blockers,
        "budget_left": budget_left,
        "escalation": turn.escalation,
        "situation": situation.as_json() if situation is not None else None,
        "learnable": not adversarial,
        "workaround_calls": turn.workaround_calls,
        "refused_calls": turn.refused_calls,
    }


@transaction.atomic
def situation_declare(
    *,
    actor: Actor,
    situation: Situation,
    tool: str,
    now: datetime,
    turn_id: str = "",
    machine: str = "",
    session_id: str = "",
) -> dict:
    """A declared situation event. With ``turn_id`` it is one failed result of that turn
    (the recovery answer comes back too); without, a ``detected`` event on its own."""
    if turn_id:
        result = TurnResult(
            tool=tool or situation.subject,
            ok=False,
            situation=situation,
            machine=machine,
            session_id=session_id,
        )
        answer = turn_result_record(actor=actor, turn_id=turn_id, result=result, now=now)
        return {"situation": situation.as_json(), "recovery": answer}
    event = event_record(
        turn=None, event=E.DETECTED, now=now, step=0, kind=situation.kind,
        subject=situation.subject, source=situation.source, tool=tool,
        workspace_id=actor.agent.workspace_id, agent_id=actor.agent.pk,
        session_id=session_id, channel=actor.channel,
        details={"persistable": situation.persistable},
    )  # fmt: skip
    return {"situation": situation.as_json(), "event_id": event.pk, "recovery": None}
