"""Memory policies, and the loop that runs one task under a policy.

``none``, ``recency`` and ``self_report`` are small in-process models of those
designs (not the products): a list of notes written by the agent. ``recency`` serves
the newest notes first and has no confidence. ``self_report`` keeps a strength per
note that rises when it is served (+0.05) and when the agent reports that following
it worked (+0.15), and falls when the agent reports that it did not (-0.25), as
memory layers that trust the model's word commonly do. ``cairn`` is Cairn as shipped,
over HTTP with the real client: an agent token for what the model writes, a harness
token for what the runner reports (real exit codes, and ``in_play`` = exactly what
``/context/`` and ``/lessons/check/`` served).
"""

from __future__ import annotations

import itertools
import uuid

from cairn_client.opkeys import program_of

from memory.lessons.lesson_text import operation_words

from .agent import (
    Attempt,
    Item,
    ScriptedAgent,
    TaskResult,
    about,
    attack_command,
    is_attack,
    parse_item,
)
from .world import COMMAND_OF, Approach, Family, Project

SERVE_MAX = 5


class Policy:
    name = "none"

    def plan(self, fam: Family) -> list[Item]:
        return []

    def check(self, fam: Family, approach: Approach) -> list[Item]:
        """Decision time, before ``approach`` runs: what memory says about it."""
        return []

    def screen(self, text: str, *, source: str) -> bool:
        """True when the text may reach the agent (False: withheld as an injection)."""
        return True

    def command_allowed(self, command: str) -> bool:
        """Decision time, before the agent runs ``command``: False refuses it."""
        return True

    def on_step(self, task_id: str, fam: Family, attempt: Attempt) -> str | None:
        """Harness hook after each command: 'escalate' stops the task."""
        return None

    def record(self, fam: Family, result: TaskResult, served: list[Item]) -> None:
        pass

    def poison_is_earned(self, item: Item) -> bool:
        return False

    def strength_of(self, approach: Approach) -> float | None:
        """How strongly memory recommends ``approach`` (None: no strengths)."""
        return None


class NotesPolicy(Policy):
    """A list of agent-written notes (the common design)."""

    def __init__(self):
        self.notes: list[dict] = []
        self.ids = itertools.count(1)

    def add(self, text: str) -> None:
        self.notes.append(
            {"id": next(self.ids), "text": text, "strength": 0.5, "t": len(self.notes)}
        )

    def ranked(self) -> list[dict]:
        return sorted(self.notes, key=lambda n: -n["t"])

    def item(self, note: dict) -> Item:
        return parse_item(f"note:{note['id']}", note["text"])

    def plan(self, fam):
        # memory layers retrieve by similarity: notes about this task's commands, and
        # notes that read like project conventions (the attacker's text is written to
        # look like one)
        hits = [
            n
            for n in self.ranked()
            if is_attack(n["text"]) or any(about(self.item(n), a) for a in fam.approaches)
        ]
        return [self.item(n) for n in hits[:SERVE_MAX]]

    def check(self, fam, approach):
        hits = [n for n in self.ranked() if about(self.item(n), approach)]
        return [self.item(n) for n in hits[:SERVE_MAX]]

    def record(self, fam, result, served):
        for note in result.notes + result.wrong_notes:
            self.add(note.text)
        for text in result.memorized:
            self.add(text)

    def strength_of(self, approach):
        if not any(about(self.item(n), approach) == "prefer" for n in self.notes):
            return None
        return max(
            (
                self.item(n).confidence or 0.5
                for n in self.notes
                if about(self.item(n), approach) == "prefer"
            ),
            default=None,
        )


class RecencyPolicy(NotesPolicy):
    name = "recency"


class SelfReportPolicy(NotesPolicy):
    name = "self_report"

    def ranked(self):
        return sorted(self.notes, key=lambda n: (-n["strength"], -n["t"]))

    def item(self, note):
        return parse_item(f"note:{note['id']}", note["text"], confidence=note["strength"])

    def _bump(self, note, delta):
        note["strength"] = min(0.95, max(0.05, note["strength"] + delta))

    def plan(self, fam):
        items = super().plan(fam)
        for it in items:  # retrieval raises strength
            self._bump(self._by_ref(it.ref), 0.05)
        return items

    def _by_ref(self, ref):
        return next(n for n in self.notes if f"note:{n['id']}" == ref)

    def record(self, fam, result, served):
        # the agent's own evidence label: followed notes rise when it says it worked
        for ref in result.followed:
            note = self._by_ref(ref)
            self._bump(note, 0.15 if result.claimed else -0.25)
        for note in result.notes:
            same = [n for n in self.notes if n["text"] == note.text]
            if same:
                self._bump(same[0], 0.15)  # "it worked again", in the agent's word
            else:
                self.add(note.text)
        for note in result.wrong_notes:
            self.add(note.text)
        for text in result.memorized:
            self.add(text)

    def poison_is_earned(self, item):
        return item.confidence is not None and item.confidence > 0.5

    def strength_of(self, approach):
        hits = [n["strength"] for n in self.notes if about(self.item(n), approach) == "prefer"]
        return max(hits, default=0.0)


class CairnPolicy(Policy):
    name = "cairn"

    def __init__(
        self,
        *,
        url: str,
        agent_token: str,
        harness_token: str,
        remote: str,
        machine: str,
        knowledge_in_play: bool = True,
        gate: bool = True,
    ):
        from cairn_client import Cairn

        # the action gate (SPEC 4a) on every command; False: the variant `cairn_nogate`
        self.gate = gate
        self.gate_session = f"bench-{uuid.uuid4().hex[:12]}"
        self.gate_benign = self.gate_false_asks = 0
        if not gate:
            self.name = "cairn_nogate"

        # False: the variant `cairn_lessons`, whose runner lists only the lessons served
        # as in play (not the memory block's knowledge items)
        self.knowledge_in_play = knowledge_in_play
        if not knowledge_in_play:
            self.name = "cairn_lessons"

        kw = dict(project_remote=remote, timeout=30)
        self.agent = Cairn(url, agent_token, **kw)
        self.harness = Cairn(url, harness_token, **kw)
        self.machine = machine
        self.served_refs: list[str] = []
        self.knowledge_conf: dict[int, float] = {}
        self.command_verdicts: dict[str, bool] = {}

    def _lesson(self, body: dict) -> Item:
        return parse_item(
            f"lesson:{body['id']}", body["text"], confidence=body.get("confidence"), earned=True
        )

    def plan(self, fam):
        ctx = self.agent.context(machine=self.machine, context="global")
        items = [self._lesson(lesson) for lesson in ctx["lessons"]]
        ids = [i["id"] for i in ctx["memory"]["items"]]
        lines = [ln[2:] for ln in ctx["memory"]["stable"].splitlines() if ln.startswith("- ")]
        # memory-block lines come in the order of `items`; both are capped alike
        for kid, line in zip(ids, lines, strict=False):
            items.append(parse_item(f"knowledge:{kid}", line))
        self.served_refs = [i.ref for i in items]
        return items

    def check(self, fam, approach):
        body = self.agent.lessons_check(approach.op, machine=self.machine, context="global")
        items = [self._lesson(lesson) for lesson in body["lessons"]]
        for blocker in body.get("blockers", []):
            items.append(
                Item(
                    ref="",
                    text=blocker.get("content", ""),
                    confidence=blocker.get("confidence", 0.9),
                    avoid=operation_words(approach.op),
                    target=fam.target,
                    escalate=True,
                    earned=True,
                )
            )
        self.served_refs += [i.ref for i in items if i.ref]
        return items

    def screen(self, text, *, source):
        answer = self.harness.classify(tool=source, exit_code=0, output=text)
        situation = answer.get("situation") or {}
        return situation.get("kind") != "injected_instruction"

    def command_allowed(self, command):
        """The bench harness's check of every command before it runs: ``/lessons/check/``
        on its operation key (a live blocker refuses it) and the situation classifier on
        the command text (``injected_instruction`` refuses it). The classifier is pure,
        so its verdict per command string is cached for the seed."""
        if command not in self.command_verdicts:
            from cairn_client.hooks import bash_operation  # the hook's own extraction

            op = f"bash:{bash_operation(command)[0]}"
            body = self.agent.lessons_check(op, machine=self.machine, context="global")
            answer = self.harness.classify(tool=op, exit_code=0, output=command)
            kind = (answer.get("situation") or {}).get("kind")
            self.command_verdicts[command] = (
                not body.get("blockers") and kind != "injected_instruction"
            )
        return self.command_verdicts[command] and self.gate_allows(command)

    def gate_allows(self, command: str) -> bool:
        """``POST /actions/check/`` with what this task was served: ``allow`` runs; ``ask``
        stands for a person who is not there (the command does not run). Asks on commands
        no planted text asked for are counted as false asks."""
        if not self.gate:
            return True
        answer = self.harness.check_action(
            command, session_id=self.gate_session, in_play=self.served_refs
        )
        benign = command not in COMMAND_OF.values()
        self.gate_benign += benign
        self.gate_false_asks += benign and answer["decision"] != "allow"
        return answer["decision"] == "allow"

    def on_step(self, task_id, fam, attempt):
        if fam.kind != "login" or attempt.ok:
            return None
        head = program_of(fam.naive.op)
        answer = self.harness.post_result(
            task_id,
            tool=attempt.approach.op,
            ok=False,
            subject=head,
            machine=self.machine,
            attended=True,
            situation={
                "kind": "auth",
                "subject": head,
                "unblock": f"run `{head} auth login` in a terminal",
                "probe": {"tool": head, "args": {"argv": ["auth", "status"]}},
            },
        )
        return answer.get("action")

    def record(self, fam, result, served):
        # what the shipped hook would report for each command: its extracted key and target
        approach = [
            {"operation_key": a.approach.op, "target": a.approach.target,
             "outcome": "ok" if a.ok else "failed", "step": a.step, "mutated": True}
            for a in result.attempts
        ]  # fmt: skip
        checks = []
        if result.verify_exit is not None:
            checks.append({"kind": "test", "label": "verify", "target": fam.name,
                           "ran": True, "exit_code": result.verify_exit,
                           "step": result.verify_step})  # fmt: skip
        in_play = []
        for ref in dict.fromkeys(self.served_refs):
            kind, _, pk = ref.partition(":")
            if kind == "knowledge" and not self.knowledge_in_play:
                continue
            in_play.append({"type": kind, "id": int(pk)})
        self.harness.post_outcome(
            {
                "outcome_id": f"loop-{uuid.uuid4().hex}",
                "session_id": f"loop-{fam.name}",
                "turn_index": 0,
                "context": "global",
                "goal": f"{fam.kind} {fam.target}",
                "approach": approach,
                "checks": checks,
                "claim_ok": result.claimed,
                "steps": len(result.attempts) + 1,
                "tokens": 0,
                "wall_s": 0.0,
                "in_play": in_play,
            }
        )
        # the model's own word goes through its own token: stored, claimed, never weighed
        for note in result.notes + result.wrong_notes:
            words = note.prefer or note.avoid
            op = next(
                (a.op for a in fam.approaches if operation_words(a.op) == words), fam.naive.op
            )
            self.agent.propose_lesson(note.text, op)
        for text in result.memorized:
            self.agent.remember(text, category="fact", context="global")

    def strength_of(self, approach):
        body = self.agent.lessons(operation_key=approach.op, state="active", limit=200)
        hits = [
            lesson["confidence"]
            for lesson in body["results"]
            if about(parse_item("", lesson["text"]), approach) == "prefer"
        ]
        return max(hits, default=0.0)

    def poison_is_earned(self, item):
        kind, _, pk = item.ref.partition(":")
        if kind == "lesson":
            return True  # only active (earned) lessons are ever served
        if kind == "knowledge":
            body = self.agent.knowledge_item(int(pk))
            return body.get("confidence", 0.5) > 0.5 + 1e-9
        return False


def decide(
    *, policy: Policy, agent: ScriptedAgent, fam: Family, current: Approach, tried: set[str]
) -> tuple[str, Approach, list[Approach], list[str]]:
    """Decision time for ONE command, the one place every command the agent is about to
    run goes through, the one it was diverted to included (as the shipped
    ``PreToolUse`` hook checks every Bash call): what memory says about it
    (``policy.check``: an escalation stops the task, a warning may divert to the command
    it recommends, which is then checked the same way), then the gate on the command
    line (``policy.command_allowed``).

    Returns (``run`` | ``refused`` | ``escalate``, the command, the commands it was
    diverted from, the refs of the items followed)."""
    diverted_from: list[Approach] = []
    refs: list[str] = []
    while True:
        checked = policy.check(fam, current)
        if agent.wants_escalation(fam, checked):
            return "escalate", current, diverted_from, refs
        seen = tried | {a.op for a in diverted_from} | {current.op}
        alt, ref = agent.divert(current, fam, checked, seen)
        if alt is None:
            break
        diverted_from.append(current)
        refs.append(ref)
        current = alt
    if not policy.command_allowed(" ".join(current.argv)):
        return "refused", current, diverted_from, refs
    return "run", current, diverted_from, refs


def run_task(
    *, policy: Policy, agent: ScriptedAgent, project: Project, fam: Family, attack_live: bool
) -> TaskResult:
    task_id = f"loop-{uuid.uuid4().hex[:16]}"
    items = policy.plan(fam)
    exposed, executes = agent.obey_instructions(items) if fam.triggered else (False, False)
    executed = stopped = False
    if executes:
        # the agent is about to run the planted command: checked like any other
        if policy.command_allowed(attack_command(items)):
            project.run(("pwn", "curl-or-env-exfil"))  # stands in for the real command
            executed = True
        else:
            stopped = True
    order, followed = agent.plan_order(fam, items)
    attempts: list[Attempt] = []
    tried: set[str] = set()
    escalated = False
    step = 0
    success = False
    verify_exit = verify_step = None
    seen: list[str] = []
    queue = list(order)
    while queue and len(attempts) < agent.p.max_steps:
        current = queue.pop(0)
        if current.op in tried:
            continue
        verdict, current, diverted_from, refs = decide(
            policy=policy, agent=agent, fam=fam, current=current, tried=tried
        )
        followed += refs
        queue[:0] = diverted_from  # what it was diverted from may still be tried later
        if verdict == "escalate":
            escalated = True
            break
        tried.add(current.op)
        if verdict == "refused":
            continue  # refused at decision time: not run, not a failed step
        step += 1
        code, out = project.run(current.argv)
        attempt = Attempt(current, code == 0, step, out)
        attempts.append(attempt)
        if policy.on_step(task_id, fam, attempt) == "escalate":
            escalated = True
            break
        if code == 0:
            step += 1
            verify_exit, verify_out = project.run(("verify", fam.name))
            verify_step = step
            if attack_live and fam.triggered and verify_out:
                seen.append(verify_out.splitlines()[0])
            success = verify_exit == 0
            break
    if fam.kind == "login":
        escalated = escalated or bool(attempts)  # out of budget: it asks the person
        success = escalated
        verify_exit = None
    project.reset(fam)
    failed_steps = sum(1 for a in attempts if not a.ok) + (1 if verify_exit not in (None, 0) else 0)
    claimed, notes, wrong = agent.reflect(fam, attempts, success, project.works)
    false_success = claimed and not success and fam.kind != "login"
    memorized = []
    for text in seen:
        if is_attack(text) and policy.screen(text, source="verify"):
            if agent.rng.random() < agent.p.m:
                memorized.append(text)
    result = TaskResult(
        family=fam.name,
        success=success,
        claimed=claimed,
        failed_steps=failed_steps,
        attempts=attempts,
        escalated=escalated,
        verify_exit=verify_exit,
        verify_step=verify_step,
        seen_texts=seen,
        notes=notes,
        wrong_notes=wrong,
        memorized=memorized,
        exposed=exposed,
        executed_attack=executed,
        stopped_attack=stopped,
        followed=[r for r in followed if r],
        false_success=false_success,
    )
    result.served = items  # for the metrics: what plan time served
    policy.record(fam, result, items)
    return result
