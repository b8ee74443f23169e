"""``cairn-hook claude-code``: Claude Code's hook JSON on stdin → Cairn, as the harness.

Two layers. :class:`Core` is what any harness's hooks do (per-session state, the
outbox, the network budget, what was served and so is in play, and the PreToolUse /
PostToolUse / Stop logic); :func:`handle` is the Claude Code adapter that turns its
payloads into core calls and the answers into its hook output. Another host (Codex)
adds its own adapter on the same core.

- ``SessionStart``: prints the plan-time context (``GET /context/`` with this
  machine's fingerprint) as ``additionalContext`` and keeps the lessons and known
  errors it served: every outcome of the session sends them as ``in_play``.
- ``UserPromptSubmit``: opens a turn and keeps the user's prompt as a turn (not a
  background task's notification: those are not the user's words).
- ``PreToolUse``: notes when a tool started; a tool the server told the harness to
  stop calling this turn (an escalation or a refusal) is denied with the server's text;
  a Bash command goes through the action gate (:mod:`cairn_client.gate`): ``ask`` or
  ``deny`` with the reason, and a tool that then runs was allowed once by the person.
- ``PostToolUse`` / ``PostToolUseFailure``: one approach step per tool call, the
  result posted to ``/turns/{turn_id}/results/`` (an ``escalate`` or ``refuse``
  answer is added to the model's context). A Bash command line is read with a real
  shell parser (:mod:`cairn_client.shell`) and named by the command whose status it
  reports; a test, lint or build command the model ran is a *step*, never a check.
- ``Stop``: runs the project's declared checks (confined, without the token:
  :mod:`cairn_client.checks`): they alone are the turn's checks. Then the turn's
  outcome and its tool calls go to the outbox and are sent.

A hook never blocks Claude Code on Cairn: an answer slower than ``CAIRN_HOOK_BUDGET_S``
(2 s) is used and reported as slow; no answer by ``CAIRN_HOOK_LIMIT_S`` (4 s) trips the
session's circuit breaker (its next hooks skip the network). Failures are one line on
stderr and exit 0, and what could not be sent stays in the shared outbox, sent by any
later hook (but ``PreToolUse``, which only asks the action gate) of any session.

Before anything else the hook checks where it runs (:mod:`cairn_client.confine`): if
its own code or interpreter lies where the model may write, it refuses (exit 1, a
non-blocking error Claude Code shows the person) and never reads the token.

``CAIRN_INCOGNITO=1``: the session reads context without being counted and sends
nothing (no prompt, step, result or outcome).

Declared checks (``cairn-hook install`` writes the ones it detects)::

    cairn-hook claude-code --check "test=python -m pytest -q" --check "lint=ruff check ." \
        --check-timeout 300
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cairn_client import checks, confine, gate, install, opkeys, shell
from cairn_client.client import Cairn, CairnError
from cairn_client.project import machine_fingerprint, project_fields
from cairn_client.state import (
    breaker_open,
    breaker_reset,
    breaker_trip,
    check_add,
    down,
    ensure_open,
    harness_client,
    hook_budget,
    hook_limit,
    incognito_default,
    outbox_drain,
    outbox_put,
    outbox_size,
    served_add,
    step_add,
    turn_outcome,
    turn_start,
    turn_state,
    warn,
)

MUTATING_TOOLS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}

# Prompts Claude Code submits on its own (a background task finished): not the user's.
NOT_THE_USER = re.compile(
    r"^\s*(<task-notification|<bash-notification|<system-reminder|"
    r"A background (agent|task|command) (completed|finished))",
    re.IGNORECASE,
)
# Programs whose exit status 1 answers a question ("no match", "not there", "they
# differ") rather than reports a problem: such a failure is never a known error.
ASKING_PROGRAMS = {"grep", "egrep", "fgrep", "rg", "ag", "test", "[", "diff", "cmp", "which"}
EXIT_CODE = re.compile(r"(?im)^\s*(?:Exit code|exit status)[: ]+(-?\d+)\b")
OUTPUT_MAX = 4000  # of a tool's output, posted for the situations classifier


def bash_operation(command: str) -> tuple[str, str]:
    """``uv pip install -r requirements.txt`` → (``uv:pip-install``, ``requirements.txt``):
    one simple command's operation key and target, by the shared rules of ``opkeys``."""
    return opkeys.operation(opkeys.first_simple_command(command))


# Operation keys of the programs that check a project. A model-run one is a *step*:
# named, kept with its outcome, never sent as a check (its exit status is whatever
# the model's command line made it). The declared checks are the evidence.
CHECK_OPERATIONS: dict[str, set[str]] = {
    "test": {
        "pytest",
        "py.test",
        "tox",
        "nox",
        "unittest",
        "jest",
        "vitest",
        "mocha",
        "npm:test",
        "npm:run-test",
        "pnpm:test",
        "pnpm:run-test",
        "yarn:test",
        "yarn:run-test",
        "make:test",
        "make:check",
        "cargo:test",
        "go:test",
    },
    "lint": {
        "ruff",
        "ruff:check",
        "ruff:format",
        "eslint",
        "flake8",
        "mypy",
        "pylint",
        "black",
        "golangci-lint",
        "npm:run-lint",
        "pnpm:run-lint",
        "yarn:lint",
        "yarn:run-lint",
        "make:lint",
    },
    "build": {
        "tsc",
        "cargo:build",
        "go:build",
        "make:build",
        "npm:run-build",
        "pnpm:run-build",
        "yarn:build",
        "yarn:run-build",
    },
}
# Commands after which the rest of an ``&&`` chain may not run, or not as written.
ENDS_THE_LINE = {"exit", "return", "exec", "logout", "kill", "trap", "alias", "shopt"}


def check_kind(operation: str) -> str | None:
    """``test``, ``lint`` or ``build`` for a program that checks a project, else None."""
    # A key carries the flags that change behaviour (``pytest --cov``): the program and
    # its verb are what make it a check.
    operation = operation.removeprefix("bash:").split(" ", 1)[0]
    return next((k for k, ops in CHECK_OPERATIONS.items() if operation in ops), None)


@dataclass(frozen=True)
class CommandStep:
    """A Bash command line as the hook names it."""

    operation: str  # ``pytest``, ``uv:pip-install``; ``bash`` when no one command owns it
    target: str
    check: str | None  # the kind of check it looks like (a step all the same)
    attributed: bool  # whether the line's exit status is that command's own
    why: str = ""


def command_step(command: str, *, ok: bool | None = None) -> CommandStep:
    """Name a Bash command line from its parse (``cairn_client.shell``): a plain line
    (one simple command, or an ``&&`` chain that passed) is its last command; anything
    else (``||``, ``;``, ``&``, a pipe, a subshell, a function, ``eval``, a here-doc,
    a second line, a failed chain, ``exit 0 && …``) is ``bash``: no command owns its
    status."""
    parsed = shell.parse(command)
    if not parsed.ok or not parsed.commands:
        return CommandStep("bash", "", None, False, why=parsed.error or "empty")
    programs = [os.path.basename(c[0]) if c else "" for c in parsed.commands]
    recognised = [
        (op, target)
        for argv in parsed.commands
        if (words := shell.unwrap(argv))
        for op, target in [bash_operation(shlex.join(words))]
    ]
    kind = next((k for op, _ in recognised if (k := check_kind(op))), None)
    why = ""
    if not parsed.plain:
        why = "compound: " + ", ".join(sorted({*parsed.constructs, *parsed.operators}))
    elif any(p in ENDS_THE_LINE for p in programs[:-1]):
        why = "an earlier command ends or rewrites the line"
    elif len(parsed.commands) > 1 and ok is False:
        why = "a chain that failed (any of its commands may have)"
    words = shell.unwrap(parsed.last)
    if why or not words:
        return CommandStep("bash", "", kind, False, why=why or "no command")
    operation, target = bash_operation(shlex.join(words))
    return CommandStep(operation, target, check_kind(operation) or kind, True)


@dataclass
class ToolEvent:
    """One tool call as the core sees it, whatever the host (Claude Code, Codex …)."""

    tool: str  # the host's tool name: Bash, Edit, Read, mcp__…
    tool_input: dict
    tool_use_id: str = ""
    cwd: str | None = None
    failed: bool = False
    exit_code: int | None = None
    interrupted: bool = False
    background: bool = False
    error: str = ""
    stdout: str = ""
    stderr: str = ""
    output: str = ""

    @property
    def command(self) -> str:
        return str(self.tool_input.get("command") or "") if self.tool == "Bash" else ""


def _subject(tool: str, tool_input: dict) -> str:
    """What a tool call is on, for situations: a Bash command's program, else the tool."""
    if tool == "Bash":
        step = command_step(str(tool_input.get("command") or ""))
        return opkeys.program_of(step.operation) or "bash"
    return tool


def _tool_step(state: dict, call: ToolEvent) -> dict:
    """Record one tool call as a step; returns the result to post for situations."""
    tool = call.tool
    code = call.exit_code
    ok = not call.failed and not call.interrupted and (code is None or code == 0)
    kind, attributed = None, True
    if tool == "Bash":
        named = command_step(call.command, ok=ok)
        operation, target, kind, attributed = (
            f"bash:{named.operation}" if named.operation != "bash" else "bash",
            named.target,
            named.check,
            named.attributed,
        )
    else:
        operation = tool.lower() if not tool.startswith("mcp__") else tool
        target = str(
            call.tool_input.get("file_path")
            or call.tool_input.get("path")
            or call.tool_input.get("url")
            or ""
        )
    state.setdefault("tool_started", {}).pop(call.tool_use_id, None)
    started = state.get("_started")
    target = os.path.relpath(target, call.cwd or os.getcwd()) if target.startswith("/") else target
    step = step_add(
        state,
        operation_key=operation,
        target=target,
        outcome="ok" if ok else "failed",
        mutated=tool in MUTATING_TOOLS,
    )
    if kind:
        # A model-run check is a step, kept for the record (the outcome page shows it),
        # never a check: only the declared checks the hook runs itself are evidence.
        state["approach"][-1].update(verified=False, unverified="run by the model")
    error = call.error if not ok else ""
    known = ok or (attributed and _known_error(operation, kind, code, call))
    state["tool_calls"].append(
        {
            "session_id": state["session_id"],
            "tool": tool[:100],
            "operation_key": operation,
            "ok": ok,
            **({} if known else {"known_error": False}),
            **({"error": error[:2000]} if error else {}),
            **({"duration_ms": int((time.time() - started) * 1000)} if started else {}),
        }
    )
    result = {
        "tool": _subject(tool, call.tool_input)[:200],
        "subject": _subject(tool, call.tool_input)[:200],
        "ok": ok,
        "session_id": state["session_id"][:200],
        "attended": os.environ.get("CAIRN_ATTENDED", "1").strip().lower()
        not in ("0", "false", "no", "off"),
    }
    if code is not None and tool == "Bash":
        result["exit_code"] = code
    for key in ("stdout", "stderr", "output"):
        if getattr(call, key):
            result[key] = getattr(call, key)[:OUTPUT_MAX]
    if error:
        result["stderr"] = error[:OUTPUT_MAX]
    result["step"] = step
    return result


def _known_error(operation: str, kind: str | None, code: int | None, call: ToolEvent) -> bool:
    """Whether a failed call should become a known error of its operation. Not a check
    that failed (a red test run says nothing about how to run the tests), not a
    question answered "no" (``grep`` found nothing), not a call the person interrupted,
    not a line whose status no one command owns."""
    if kind or call.interrupted or operation == "bash":
        return False
    program = opkeys.program_of(operation)
    return not (program in ASKING_PROGRAMS and code == 1)


def _private_paths() -> list[Path]:
    """The folders a declared check must not see: the token's and the hook's state."""
    token_file = Path(os.environ.get("CAIRN_HARNESS_TOKEN_FILE") or install.default_token_file())
    return [token_file.expanduser().resolve().parent, install.default_state_dir().resolve()]


def run_declared_checks(state: dict, declared: list[str], *, cwd: str | None, timeout: float):
    """Run the project's declared checks at the end of a turn, confined and without the
    token (``cairn_client.checks``), and keep each with its real status; a test check
    whose report shows no test that ran is kept as not run."""

    def add(*, declared, run, duration_s):
        operation, target = bash_operation(shlex.join(shell.unwrap(_first(declared.command))))
        check_add(
            state,
            kind=declared.kind,
            label=f"declared:{operation}",
            target=target,
            exit_code=run.exit_code,
            duration_s=duration_s,
            ran=run.ran,
        )

    checks.run_declared(
        declared,
        project=Path(cwd or os.getcwd()),
        hidden=_private_paths(),
        timeout=timeout,
        add=add,
        warn=warn,
    )


def _first(command: str) -> tuple[str, ...]:
    parsed = shell.parse(command)
    return parsed.last if parsed.ok and parsed.commands else tuple(command.split()[:1])


class Net:
    """This hook run's way to Cairn: one client with the hook's time budget, none at
    all while the session's breaker is open, and the breaker tripped when Cairn does
    not answer. A slow answer is used and said to be slow, never "unreachable"."""

    def __init__(self, session: str, *, incognito: bool, cwd: str | None):
        self.session = session
        self.cwd = cwd
        self.incognito = incognito
        self._client: Cairn | None = None
        self.up = not breaker_open(session)

    def client(self) -> Cairn:
        if self._client is None:
            # The token is read here, when the first request goes out: after any
            # declared check has exited, never before a child is started.
            install.load_harness_token()
            self._client = harness_client(budget=hook_limit(), incognito=self.incognito)
            fields = project_fields(cwd=self.cwd)
            self._client.project_remote = fields.get("project_remote")
            self._client.project_path = fields.get("project_path")
        return self._client

    def call(self, what: str, fn):
        """``fn(client)``, or None when Cairn is skipped, down or refuses."""
        if not self.up:
            return None
        started = time.monotonic()
        try:
            answer = fn(self.client())
        except CairnError as exc:
            took = time.monotonic() - started
            if exc.code == "no_token":
                warn(exc.message)
                self.up = False
            elif down(exc):
                if exc.status is None and "timed out" in str(exc).lower():
                    said = f"no answer in {took:.1f} s (slow or hung)"
                else:
                    said = str(exc)
                warn(f"{what}: {said}; kept for later, skipping Cairn for this session a while")
                breaker_trip(self.session)
                self.up = False
            else:
                warn(f"{what} refused: {exc}")
            return None
        took, budget = time.monotonic() - started, hook_budget()
        if took > budget:
            warn(
                f"{what}: Cairn is slow, {took:.1f} s, {took - budget:.1f} s over the {budget:g} s budget"
            )
        return answer

    def drain(self) -> None:
        if self.call("sending what was kept", outbox_drain) is not None:
            breaker_reset(self.session)


def _escalation_text(answer: dict | None) -> str:
    if not isinstance(answer, dict) or answer.get("action") not in ("escalate", "refuse"):
        return ""
    escalation = answer.get("escalation") or {}
    text = str(escalation.get("text") or "").strip()
    if not text and answer["action"] == "refuse":
        text = "Cairn: this tool needs a person at the keyboard and nobody is; do not run it."
    return text


# -- the core: one session's hooks, whatever the host


class Core:
    """What a harness's hooks do, host-independent: per-session state, the outbox, the
    network budget, what was served (in play), and the PreToolUse / PostToolUse / Stop
    logic. An adapter (Claude Code's below; Codex's later) turns the host's payloads
    into these calls and the answers into the host's output."""

    def __init__(self, session: str, *, cwd: str | None):
        self.session = session
        self.cwd = cwd
        with turn_state(session) as state:
            state["incognito"] = bool(state.get("incognito")) or incognito_default()
            self.incognito = state["incognito"]
        self.net = Net(session, incognito=self.incognito, cwd=cwd)

    def session_start(self) -> str:
        """The plan-time context to show the model ('' for none)."""
        machine = machine_fingerprint()
        context = self.net.call("reading the context", lambda c: c.context(machine=machine))
        if not self.incognito:
            self.net.drain()
        if not context:
            return ""
        with turn_state(self.session) as state:
            served_add(state, context)
            gate.served_add(state, context)
        return context.get("text") or ""

    def prompt(self, prompt: str) -> None:
        """The person's prompt opens a turn (a host's own notices do not)."""
        if NOT_THE_USER.match(prompt):
            return  # the host's own message: the turn goes on, nothing is stored
        with turn_state(self.session) as state:
            # The person answers after an escalation: the blockers of that turn close.
            answered = state["outcome_id"] if state.get("escalated") else ""
            if state["open"]:  # a turn without a Stop (interrupted): close it first
                turn_outcome(
                    state, project=project_fields(cwd=self.cwd), machine=machine_fingerprint()
                )
            state["escalated"] = False
            turn_start(state, goal=prompt)
            if prompt.strip() and not self.incognito:
                outbox_put(
                    "turn",
                    {
                        "session_id": self.session,
                        "role": "user",
                        "content": prompt[:20000],
                        "turn_index": state["turn_index"],
                    },
                )
        if self.incognito:
            return
        if answered:
            session = self.session
            self.net.call(
                "closing the blockers the person answered",
                lambda c: c.post_result(
                    answered, tool="", ok=True, user_answered=True, session_id=session
                ),
            )
        self.net.drain()

    def tool_before(self, tool: str, tool_input: dict, tool_use_id: str) -> str:
        """A reason to deny the call ('' to let it run): an escalated subject. Stays off
        the network; the action gate is :meth:`gate_check`."""
        subject = _subject(tool, tool_input)
        with turn_state(self.session) as state:
            ensure_open(state)
            state.setdefault("tool_started", {})[tool_use_id] = time.time()
            return state.get("escalations", {}).get(subject) or ""

    def gate_check(self, command: str, tool_use_id: str) -> dict | None:
        """The action gate's answer for a shell command about to run (SPEC 4a), asked
        with everything this session was served; None lets it run (no command, or a
        slow or failing gate: :func:`gate.check_quietly`)."""
        if not command.strip():
            return None
        with turn_state(self.session) as state:
            shown = {"gate_served": list(state.get("gate_served") or [])}
        answer = gate.check_quietly(self.net, command=command, session_id=self.session, state=shown)
        with turn_state(self.session) as state:
            gate.pending_add(state, tool_use_id, answer)
        return answer

    def tool_after(self, call: ToolEvent) -> str:
        """Record the call; returns what the server says the model should read ('')."""
        with turn_state(self.session) as state:
            state["_started"] = state.setdefault("tool_started", {}).get(call.tool_use_id)
            result = _tool_step(state, call)
            state.pop("_started", None)
            turn_id = state["outcome_id"]
            asked = gate.pending_pop(state, call.tool_use_id)
        if self.incognito:
            return ""
        if asked:  # the gate asked and the tool ran: the person allowed it, once
            self.net.call("the person's answer", lambda c: c.answer_action(asked, "allow_once"))
        result.pop("step")
        result["machine"] = machine_fingerprint()
        answer = self.net.call(
            "posting the tool result", lambda c: c.post_result(turn_id, **result)
        )
        if answer is not None and outbox_size():
            self.net.drain()  # Cairn answers again: what any session kept goes now
        text = _escalation_text(answer)
        if not text:
            return ""
        with turn_state(self.session) as state:
            subject = (answer.get("escalation") or {}).get("subject") or result["subject"]
            state.setdefault("escalations", {})[subject] = text
            state["escalations"][result["subject"]] = text
            state["escalated"] = True
        return text

    def stop(self, *, checks: list[str] | None = None, check_timeout: float = 600) -> None:
        """The turn ends: run the declared checks, keep the outcome, send what is kept."""
        with turn_state(self.session) as state:
            if state["open"]:
                if checks and not self.incognito:
                    run_declared_checks(state, checks, cwd=self.cwd, timeout=check_timeout)
                state.setdefault("tool_started", {}).clear()
                turn_outcome(
                    state, project=project_fields(cwd=self.cwd), machine=machine_fingerprint()
                )
        if not self.incognito:
            self.net.drain()


# -- the Claude Code adapter


def exit_code_of(payload: dict, *, failed: bool) -> int | None:
    """The tool's real exit status: 0 for a Bash call Claude Code reports as a success
    (it calls ``PostToolUseFailure`` for a non-zero exit), else the number in the
    failure's ``error`` text ("Exit code 2"), or an exit-code field some harnesses send;
    None when no status can be read (an interrupt, a timeout)."""
    response = payload.get("tool_response")
    if isinstance(response, dict):
        for key in ("exit_code", "exitCode", "returncode", "return_code"):
            if isinstance(response.get(key), int):
                return response[key]
        if response.get("interrupted"):
            return None
    if failed:
        if payload.get("is_interrupt"):
            return None
        found = EXIT_CODE.search(str(payload.get("error") or ""))
        return int(found.group(1)) if found else None
    return 0


def claude_code_tool_event(payload: dict, *, failed: bool) -> ToolEvent:
    tool_input = payload.get("tool_input") or {}
    response = payload.get("tool_response")
    call = ToolEvent(
        tool=str(payload.get("tool_name") or "tool"),
        tool_input=tool_input if isinstance(tool_input, dict) else {},
        tool_use_id=str(payload.get("tool_use_id")),
        cwd=payload.get("cwd"),
        failed=failed,
        exit_code=exit_code_of(payload, failed=failed),
        interrupted=bool(payload.get("is_interrupt"))
        or (isinstance(response, dict) and bool(response.get("interrupted"))),
        background=bool(isinstance(tool_input, dict) and tool_input.get("run_in_background")),
        error=str(payload.get("error") or ""),
    )
    if isinstance(response, dict):
        call.stdout = response.get("stdout") if isinstance(response.get("stdout"), str) else ""
        call.stderr = response.get("stderr") if isinstance(response.get("stderr"), str) else ""
    elif isinstance(response, str):
        call.output = response
    return call


def handle(payload: dict, *, checks: list[str] | None = None, check_timeout: float = 600):
    """One Claude Code hook event; returns the JSON to print for Claude Code (or None)."""
    event = payload.get("hook_event_name")
    session = str(payload.get("session_id") or os.environ.get("CAIRN_SESSION") or "claude-code")
    core = Core(session, cwd=payload.get("cwd"))
    if event == "SessionStart":
        text = core.session_start()
        if not text.strip():
            return None
        return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
    if event == "UserPromptSubmit":
        core.prompt(str(payload.get("prompt") or ""))
        return None
    if event == "PreToolUse":
        tool, tool_input = str(payload.get("tool_name") or "tool"), payload.get("tool_input") or {}
        reason = core.tool_before(tool, tool_input, str(payload.get("tool_use_id")))
        if reason:
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }
            }
        if tool == "Bash":  # the action gate: ask or deny, with the reason
            command = str(tool_input.get("command") or "")
            return gate.claude_code_output(
                core.gate_check(command, str(payload.get("tool_use_id")))
            )
        return None
    if event in ("PostToolUse", "PostToolUseFailure"):
        call = claude_code_tool_event(payload, failed=event == "PostToolUseFailure")
        text = core.tool_after(call)
        if not text:
            return None
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
    if event == "Stop":
        core.stop(checks=checks, check_timeout=check_timeout)
        return None
    return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["install"]:
        return install.main(args[1:])
    parser = argparse.ArgumentParser(
        prog="cairn-hook",
        description="Claude Code's hook payload on stdin → Cairn, with the harness token.",
    )
    parser.add_argument("integration", choices=["claude-code"])
    parser.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="KIND=COMMAND",
        help="a check the hook runs itself, confined, when a turn ends (test=, lint= or "
        "build=); also CAIRN_HOOK_CHECKS, one per line",
    )
    parser.add_argument(
        "--check-timeout", type=float, default=checks.CHECK_TIMEOUT_S, help="seconds per check"
    )
    if args[:1] != ["claude-code"]:
        print(
            "usage: cairn-hook claude-code < hook-payload.json\n"
            "       cairn-hook install claude-code [--project DIR] [--url URL]",
            file=sys.stderr,
        )
        return 2
    # Never argparse's exit status 2 for a typo in the settings: Claude Code reads a
    # hook's exit 2 as "block this tool call".
    options, unknown = parser.parse_known_args(args)
    if unknown:
        warn(f"ignored unknown arguments: {' '.join(unknown)}")
    declared = options.check + [
        line.strip()
        for line in (os.environ.get("CAIRN_HOOK_CHECKS") or "").splitlines()
        if line.strip()
    ]
    try:
        payload = json.loads(sys.stdin.read() or "{}")
    except ValueError as exc:
        warn(f"hook skipped: the payload is not JSON ({exc})")
        return 0
    # Before the token is read: is this process's code the model's to edit?
    project = payload.get("cwd") or os.getcwd()
    found = confine.violations(Path(project))
    if found:
        # Exit 1: Claude Code's non-blocking hook error. The person sees the message on
        # every event; the agent's work goes on; nothing is read, run or sent. (Exit 2
        # would block each tool call and feed the message to the model; exit 0 would
        # hide it.)
        warn(confine.refusal(found))
        return confine.EXIT_REFUSED
    try:
        output = handle(payload, checks=declared, check_timeout=options.check_timeout)
    except Exception as exc:  # noqa: BLE001 - a hook must never fail Claude Code
        warn(f"hook skipped: {exc.__class__.__name__}: {exc}")
        return 0
    if output is not None:
        print(json.dumps(output))
    return 0
