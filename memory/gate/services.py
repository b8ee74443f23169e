"""The action gate's one decision and the person's answer to it (SPEC section 4a).

Every path that asks "may this command run?" (the API, ``cairn-hook``, ``cairn-turn
check``, the benchmark's runner) goes through :func:`action_check`; every answer through
:func:`action_answer`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from cairn.errors import ApplicationError, NotFoundError
from memory.core.actors import Actor
from memory.core.audit import audit_record
from memory.core.provenance import (
    APPROVED_KEY,
    knowledge_item_provenance,
    lesson_item_provenance,
)
from memory.core.secrets import refuse_secrets
from memory.core.validation import bad_request
from memory.gate.normalize import skeleton
from memory.gate.reach import ReachPart, command_reach, text_reach
from memory.models import (
    ActionAnswer,
    ActionApproval,
    ActionCheck,
    ActionDecision,
    Channel,
    ConversationTurn,
    Knowledge,
    KnowledgeStatus,
    Lesson,
    TurnRole,
    Workspace,
)
from memory.situations.selectors import known_blockers, operation_subjects

COMMAND_MAX_CHARS = 20000
WITHHELD = "[withheld: the command carries a credential]"
REACH_WHY = {
    "host": "an address",
    "path": "a path outside the project",
    "credential": "a credential's variable",
    "interpreter": "code handed to an interpreter",
    "package": "a package source",
    "remote": "a git remote",
    "check_off": "a switch that turns a check off",
}


@dataclass
class GateAnswer:
    decision: str
    reasons: list[dict] = field(default_factory=list)
    reach: list[ReachPart] = field(default_factory=list)
    check_id: int | None = None

    def as_json(self) -> dict:
        return {
            "decision": self.decision,
            "reasons": self.reasons,
            "reach": [{"kind": p.kind, "key": p.key} for p in self.reach],
            "check_id": self.check_id,
        }


@dataclass(frozen=True)
class _Served:
    ref: str
    text: str
    earned: bool
    origin: str


def _appears(part: ReachPart, *, text: str, parts: set[tuple[str, str]]) -> bool:
    """Whether served text carries this reach part, after the same normalisation."""
    if (part.kind, part.key) in parts:
        return True
    if part.kind == "interpreter":
        return False  # "interpreter" as a word in prose is not a pipe into one
    needle = part.key
    if part.kind == "package":  # index:host, url:host, name:pkg
        needle = needle.split(":", 1)[1]
    elif part.kind == "remote" and "/" in needle:  # owner/repo, in any remote spelling
        needle = needle.split("/", 1)[1]
    return bool(needle) and needle in text


def _served(*, workspace: Workspace, in_play: list[dict], project_digest: str) -> list[_Served]:
    """The session's served items, one indexed read per kind (by primary key)."""
    knowledge_ids = sorted({r["id"] for r in in_play if r["type"] in ("knowledge", "error")})
    lesson_ids = sorted({r["id"] for r in in_play if r["type"] == "lesson"})
    served: list[_Served] = []
    if knowledge_ids:
        for item in Knowledge.objects.filter(
            workspace=workspace, pk__in=knowledge_ids, status=KnowledgeStatus.ACTIVE
        ).only("id", "content", "channel", "source", "sealed", "metadata", "confidence"):
            prov = knowledge_item_provenance(item, project_digest=project_digest)
            served.append(_Served(f"knowledge:{item.pk}", item.content, prov.earned, prov.origin))
    if lesson_ids:
        for lesson in Lesson.objects.filter(workspace=workspace, pk__in=lesson_ids).only(
            "id", "text", "rationale", "channel", "source", "state", "sealed"
        ):
            prov = lesson_item_provenance(lesson)
            text = f"{lesson.text} {lesson.rationale}"
            served.append(_Served(f"lesson:{lesson.pk}", text, prov.earned, prov.origin))
    return served


def _person_words(*, workspace: Workspace, session_id: str) -> str:
    """The person's own words this session: user turns the harness (or a person) posted."""
    if not session_id:
        return ""
    turns = ConversationTurn.objects.filter(
        workspace=workspace,
        session_id=session_id,
        role=TurnRole.USER,
        channel__in=(Channel.HARNESS, Channel.PERSON),
    ).values_list("content", flat=True)
    return "\n".join(turns)


def action_check(
    *,
    workspace: Workspace,
    actor: Actor,
    command: str,
    session_id: str = "",
    in_play: list[dict] | None = None,
    project_digest: str = "",
    project_path: str | None = None,
    machine: str = "",
    operation_key: str = "",
    now: datetime | None = None,
    record: bool = True,
) -> GateAnswer:
    """May ``command`` run? ``allow``, ``ask`` (a person decides) or ``deny``.

    1. A live blocker on ``machine`` for the command's operation denies (as
       ``/lessons/check/`` does).
    2. The command's reach (:func:`memory.gate.reach.command_reach`). None: allow, with
       no further read.
    3. The served items (``in_play``), read by id. A reach part that appears in an
       unearned or quoted one is *steered* by it.
    4. A steered part is vouched for when it also appears in the person's own words this
       session, in an earned served item, or in what a person approved for the project;
       otherwise the answer is ``ask``, naming the item and the part.
    Answers other than ``allow`` are stored (:class:`ActionCheck`) for the person's answer,
    unless ``record`` is False (an incognito session); a command that carries a
    credential is stored without its text.
    """
    if len(command) > COMMAND_MAX_CHARS:
        raise bad_request("command", f"at most {COMMAND_MAX_CHARS} characters")
    now = now or timezone.now()
    in_play = in_play or []
    if machine and operation_key:
        blockers = known_blockers(
            workspace=workspace,
            machine=machine,
            now=now,
            subjects=operation_subjects(operation_key),
        )
        if blockers:
            reasons = [
                {"item": f"lesson:{b.pk}", "why": f"known blocker on this machine: {b.content}"}
                for b in blockers
            ]
            return _record(workspace, actor, command, session_id, project_digest,
                           GateAnswer(ActionDecision.DENY, reasons), record)  # fmt: skip
    reach = command_reach(command, project_path=project_path)
    if not reach:
        return GateAnswer(ActionDecision.ALLOW, [], reach)
    served = _served(workspace=workspace, in_play=in_play, project_digest=project_digest)
    unearned = [s for s in served if not s.earned]
    if not unearned:
        return GateAnswer(ActionDecision.ALLOW, [], reach)
    texts = {s.ref: skeleton(s.text) for s in served}
    parts = {
        s.ref: {(p.kind, p.key) for p in text_reach(s.text, project_path=project_path)}
        for s in served
    }
    steered = [
        (part, item)
        for part in reach
        for item in unearned
        if _appears(part, text=texts[item.ref], parts=parts[item.ref])
    ]
    if not steered:
        return GateAnswer(ActionDecision.ALLOW, [], reach)
    person = skeleton(_person_words(workspace=workspace, session_id=session_id))
    person_parts = {(p.kind, p.key) for p in text_reach(person)} if person else set()
    approved = set(
        ActionApproval.objects.filter(
            workspace=workspace,
            project_digest=project_digest,
            key__in=sorted({p.key for p, _ in steered}),
        ).values_list("kind", "key")
    )
    earned = [s for s in served if s.earned]
    reasons = []
    for part, item in steered:
        if (part.kind, part.key) in approved:
            continue
        if person and _appears(part, text=person, parts=person_parts):
            continue
        if any(_appears(part, text=texts[e.ref], parts=parts[e.ref]) for e in earned):
            continue
        label = "quoted text" if item.origin == "quoted" else "an unverified note"
        reasons.append(
            {
                "item": item.ref,
                "why": f"{REACH_WHY[part.kind]} ({part.raw or part.key}) comes from {label} "
                f"({item.ref}), not from the person or an earned item",
                "reach": {"kind": part.kind, "key": part.key},
            }
        )
    if not reasons:
        return GateAnswer(ActionDecision.ALLOW, [], reach)
    return _record(workspace, actor, command, session_id, project_digest,
                   GateAnswer(ActionDecision.ASK, reasons, reach), record)  # fmt: skip


def _record(
    workspace, actor, command, session_id, project_digest, answer: GateAnswer, record: bool
):
    if not record:
        return answer
    try:
        refuse_secrets({"command": command})
    except ApplicationError:
        command = WITHHELD
    row = ActionCheck.objects.create(
        workspace=workspace,
        agent=actor.agent,
        session_id=session_id,
        project_digest=project_digest,
        command=command,
        decision=answer.decision,
        reasons=answer.reasons,
        reach=[{"kind": p.kind, "key": p.key} for p in answer.reach],
    )
    answer.check_id = row.pk
    return answer


@transaction.atomic
def action_answer(*, workspace: Workspace, actor: Actor, check_id: int, answer: str) -> ActionCheck:
    """Record a person's answer to an ``ask``, relayed by the harness (or given in the UI).

    ``always`` approves, for the check's project, every reach part it asked about and
    earns the unearned knowledge items that carried them (``approved_for_projects``).
    Only the harness or a person answers: an agent token cannot approve its own command.
    """
    if not actor.weighs:
        raise ApplicationError(
            "Only a person (through the harness or the review UI) answers the gate; an "
            "agent token cannot approve its own command.",
            code="forbidden",
            fields={"answer": ["needs a harness token or a person"]},
            status_code=403,
        )
    if answer not in ActionAnswer.values:
        raise bad_request("answer", f"one of {', '.join(ActionAnswer.values)}")
    check = (
        ActionCheck.objects.select_for_update()
        .filter(workspace=workspace, pk=check_id, decision=ActionDecision.ASK)
        .first()
    )
    if check is None:
        raise NotFoundError("No asked check with this id in this workspace.")
    check.answer = answer
    check.answered_by = actor.label
    check.answered_at = timezone.now()
    check.save(update_fields=["answer", "answered_by", "answered_at"])
    if answer == ActionAnswer.ALWAYS:
        for reason in check.reasons:
            part = reason.get("reach") or {}
            if part:
                ActionApproval.objects.get_or_create(
                    workspace=workspace,
                    project_digest=check.project_digest,
                    kind=part["kind"],
                    key=part["key"],
                    defaults={"action_check": check, "approved_by": actor.label},
                )
        ids = {
            int(r["item"].split(":")[1])
            for r in check.reasons
            if r["item"].startswith("knowledge:")
        }
        for item in Knowledge.objects.select_for_update().filter(workspace=workspace, pk__in=ids):
            approved = list(item.metadata.get(APPROVED_KEY) or [])
            if check.project_digest not in approved:
                item.metadata = {**item.metadata, APPROVED_KEY: [*approved, check.project_digest]}
                item.save(update_fields=["metadata", "updated_at"])
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action="action.answered",
        target_type="action_check",
        target_id=check.pk,
        details={"answer": answer},
    )
    return check
