"""``cairn-hook claude-code``: Claude Code's hook JSON on stdin → Cairn, as the harness.

Claude Code runs hooks itself, so what they report is what really happened:

- ``SessionStart``: prints the plan-time context (``GET /context/`` with this
  machine's fingerprint) as ``additionalContext`` and keeps the lessons and known
  errors it served: every outcome of the session sends them as ``in_play``.
- ``UserPromptSubmit``: opens a turn and keeps the user's prompt as a turn (not a
  background task's notification: those are not the user's words).
- ``PreToolUse``: notes when a tool started; a tool the server told the harness to
  stop calling this turn (an escalation or a refusal) is denied with the server's text.
- ``PostToolUse`` / ``PostToolUseFailure``: one approach step per tool call, the
  result posted to ``/turns/{turn_id}/results/`` (an ``escalate`` or ``refuse``
  answer is added to the model's context); Bash checks (pytest, npm test, ruff,
  tsc …) become checks only when their real exit status is known (see
  :func:`attributed_check`), else they are kept as unverified steps.
- ``Stop``: runs the checks declared on the hook's command line, if any, and posts
  the turn's outcome and its tool calls.

A hook never blocks Claude Code on Cairn: its network time is capped at
``CAIRN_HOOK_BUDGET_S`` (1 s), a failure trips the session's circuit breaker (the
next hooks skip the network), failures are one line on stderr and exit 0, and what
could not be sent stays in the shared outbox, sent by any later hook (but
``PreToolUse``, which stays off the network) of any session.

``CAIRN_INCOGNITO=1``: the session reads context without being counted and sends
nothing (no prompt, step, result or outcome).

Declared checks (evidence the model cannot shape)::

    cairn-hook claude-code --check "test=pytest -q" --check "lint=ruff check ." \
        --check-timeout 300
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time

from cairn_client import install, opkeys
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

# (kind, pattern over the command line); override with CAIRN_CHECK_PATTERNS as JSON
# {"test": ["regex", ...], "lint": [...], "build": [...]}.
DEFAULT_CHECK_PATTERNS: dict[str, list[str]] = {
    "test": [
        r"^(python3? -m )?pytest\b",
        r"^(npm|pnpm|yarn)( run)? test\b",
        r"^cargo test\b",
        r"^go test\b",
        r"^make test\b",
        r"^tox\b",
    ],
    "lint": [
        r"^ruff( check| format --check)?\b",
        r"^(npx )?eslint\b",
        r"^(npm|pnpm|yarn)( run)? lint\b",
        r"^flake8\b",
        r"^mypy\b",
        r"^golangci-lint\b",
    ],
    "build": [
        r"^(npx )?tsc\b",
        r"^cargo build\b",
        r"^go build\b",
        r"^make( build)?\s*$",
        r"^(npm|pnpm|yarn)( run)? build\b",
    ],
}
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


def check_patterns() -> dict[str, list[re.Pattern]]:
    raw = os.environ.get("CAIRN_CHECK_PATTERNS")
    patterns = json.loads(raw) if raw else DEFAULT_CHECK_PATTERNS
    return {kind: [re.compile(p) for p in items] for kind, items in patterns.items()}


def check_kind(command: str) -> str | None:
    words = _words(command.strip())
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    command = " ".join(words)
    for kind, patterns in check_patterns().items():
        if any(p.search(command) for p in patterns):
            return kind
    return None


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def bash_operation(command: str) -> tuple[str, str]:
    """``uv pip install -r requirements.txt`` → (``uv:pip-install``, ``requirements.txt``):
    one simple command's operation key and target, by the shared rules of ``opkeys``."""
    return opkeys.operation(opkeys.first_simple_command(command))


def _segments(command: str) -> list[list[str]] | None:
    """The ``&&``-chained simple commands of ``command``; None when it has anything
    else that decides its exit status (a pipe, ``||``, ``;``, ``&``, a subshell, a
    command substitution, a second line) or cannot be read."""
    if "\n" in command.strip() or "`" in command or "$(" in command:
        return None
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token and set(token) <= set("();<>|&"):
            if token == "&&":
                segments.append([])
            elif re.fullmatch(r"[0-9]*(>|>>|<|>&|&>|<&)", token) or token in (">&", "&>"):
                segments[-1].append(token)  # a redirection keeps the command's status
            else:
                return None
        else:
            segments[-1].append(token)
    return segments if all(segments) else None


def attributed_check(command: str, *, exit_code: int | None, background: bool):
    """``(kind, why_unverified)`` for a Bash command that looks like a check.

    A check is evidence only when the exit status Claude Code reports is the check's
    own: a bare command, or the last of an ``&&`` chain when the chain passed (a
    failed chain may have failed before the check ran). A pipeline (``pytest | tail``),
    ``|| true``, a ``;`` list, a background run, or a status the hook could not read
    is kept as an unverified step: no check, nothing for confidence."""
    segments = _segments(command)
    if segments is None:
        kind = check_kind(command) or next(
            (k for part in re.split(r"\|\||&&|[|;&]", command) if (k := check_kind(part))), None
        )
        return (kind, "compound command") if kind else (None, None)
    kinds = [check_kind(shlex.join(segment)) for segment in segments]
    if not any(kinds):
        return None, None
    kind = kinds[-1] or next(k for k in kinds if k)
    if background:
        return kind, "run in the background"
    if kinds[-1] is None:
        return kind, "not the last command"
    if exit_code is None:
        return kind, "exit status unknown"
    if len(segments) > 1 and exit_code != 0:
        return kind, "a chain that failed"
    return kind, None


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


def _subject(tool: str, tool_input: dict) -> str:
    """What a tool call is on, for situations: a Bash command's program, else the tool."""
    if tool == "Bash":
        operation, _ = bash_operation(str(tool_input.get("command") or ""))
        return opkeys.program_of(operation) or "bash"
    return tool


def _tool_step(state: dict, payload: dict, *, failed: bool) -> dict:
    """Record one tool call; returns the result to post for situations."""
    tool = str(payload.get("tool_name") or "tool")
    tool_input = payload.get("tool_input") or {}
    code = exit_code_of(payload, failed=failed)
    response = payload.get("tool_response")
    interrupted = isinstance(response, dict) and bool(response.get("interrupted"))
    ok = not failed and not interrupted and (code is None or code == 0)
    command = ""
    if tool == "Bash":
        command = str(tool_input.get("command") or "")
        segments = _segments(command)
        # ``cd sub && pytest -q`` is a pytest run: an && chain is named by its last command.
        last = shlex.join(segments[-1]) if segments and len(segments) > 1 else command
        operation, target = bash_operation(last)
        operation = f"bash:{operation}"
    else:
        operation = tool.lower() if not tool.startswith("mcp__") else tool
        target = str(
            tool_input.get("file_path") or tool_input.get("path") or tool_input.get("url") or ""
        )
    started = state.setdefault("tool_started", {}).pop(str(payload.get("tool_use_id")), None)
    target = (
        os.path.relpath(target, payload.get("cwd") or os.getcwd())
        if target.startswith("/")
        else target
    )
    kind, unverified = (None, None)
    if tool == "Bash":
        background = bool(tool_input.get("run_in_background"))
        kind, unverified = attributed_check(command, exit_code=code, background=background)
    step = step_add(
        state,
        operation_key=operation,
        target=target,
        outcome="ok" if ok else "failed",
        mutated=tool in MUTATING_TOOLS,
    )
    if kind and unverified:
        # Kept for the record (the outcome page shows the step), never as a check.
        state["approach"][-1].update(verified=False, unverified=unverified)
    elif kind:
        check_add(
            state,
            kind=kind,
            label=operation.removeprefix("bash:"),
            target=target,
            exit_code=code,
            duration_s=None if started is None else time.time() - started,
        )
    error = str(payload.get("error") or "") if not ok else ""
    state["tool_calls"].append(
        {
            "session_id": state["session_id"],
            "tool": tool[:100],
            "operation_key": operation,
            "ok": ok,
            **(
                {} if ok or _known_error(operation, kind, code, payload) else {"known_error": False}
            ),
            **({"error": error[:2000]} if error else {}),
            **({"duration_ms": int((time.time() - started) * 1000)} if started else {}),
        }
    )
    result = {
        "tool": _subject(tool, tool_input)[:200],
        "subject": _subject(tool, tool_input)[:200],
        "ok": ok,
        "session_id": state["session_id"][:200],
        "attended": os.environ.get("CAIRN_ATTENDED", "1").strip().lower()
        not in ("0", "false", "no", "off"),
    }
    if code is not None and tool == "Bash":
        result["exit_code"] = code
    if isinstance(response, dict):
        for key in ("stdout", "stderr"):
            if isinstance(response.get(key), str) and response[key]:
                result[key] = response[key][:OUTPUT_MAX]
    elif isinstance(response, str) and response:
        result["output"] = response[:OUTPUT_MAX]
    if error:
        result["stderr"] = error[:OUTPUT_MAX]
    result["step"] = step
    return result


def _known_error(operation: str, kind: str | None, code: int | None, payload: dict) -> bool:
    """Whether a failed call should become a known error of its operation. Not a check
    that failed (its verdict is the evidence; a red test run says nothing about how to
    run the tests), not a question answered "no" (``grep`` found nothing), not a call
    the person interrupted."""
    if kind or payload.get("is_interrupt"):
        return False
    program = opkeys.program_of(operation)
    return not (program in ASKING_PROGRAMS and code == 1)


def run_declared_checks(state: dict, checks: list[str], *, cwd: str | None, timeout: float):
    """Run the checks declared on the hook's command line (``kind=command``) at the end
    of a turn, outside the model, and keep each as a check with its real exit status
    (124 when it ran out of time)."""
    for declared in checks:
        kind, _, command = declared.partition("=")
        if kind not in ("test", "lint", "build") or not command.strip():
            warn(f"ignored --check {declared!r}: write it as test=CMD, lint=CMD or build=CMD")
            continue
        started = time.monotonic()
        try:
            code = subprocess.run(
                command,
                shell=True,
                cwd=cwd or None,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=timeout,
            ).returncode
        except subprocess.TimeoutExpired:
            code = 124
        except OSError:
            code = 127
        operation, target = bash_operation(command)
        check_add(
            state,
            kind=kind,
            label=f"declared:{operation}",
            target=target,
            exit_code=code,
            duration_s=time.monotonic() - started,
        )


class Net:
    """This hook run's way to Cairn: one client with the hook's time budget, none at
    all while the session's breaker is open, and the breaker tripped on a failure."""

    def __init__(self, session: str, *, incognito: bool, cwd: str | None):
        self.session = session
        self.cwd = cwd
        self.incognito = incognito
        self._client: Cairn | None = None
        self.up = not breaker_open(session)

    def client(self) -> Cairn:
        if self._client is None:
            self._client = harness_client(budget=hook_budget(), incognito=self.incognito)
            fields = project_fields(cwd=self.cwd)
            self._client.project_remote = fields.get("project_remote")
            self._client.project_path = fields.get("project_path")
        return self._client

    def call(self, what: str, fn):
        """``fn(client)``, or None when Cairn is skipped, down or refuses."""
        if not self.up:
            return None
        try:
            return fn(self.client())
        except CairnError as exc:
            if exc.code == "no_token":
                warn(exc.message)
                self.up = False
            elif down(exc):
                warn(f"{what}: {exc}; skipping Cairn for this session a while")
                breaker_trip(self.session)
                self.up = False
            else:
                warn(f"{what} refused: {exc}")
            return None

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


def handle(payload: dict, *, checks: list[str] | None = None, check_timeout: float = 600):
    """One hook event; returns the JSON to print for Claude Code (or None)."""
    event = payload.get("hook_event_name")
    session = str(payload.get("session_id") or os.environ.get("CAIRN_SESSION") or "claude-code")
    cwd = payload.get("cwd")
    with turn_state(session) as state:
        state["incognito"] = bool(state.get("incognito")) or incognito_default()
        incognito = state["incognito"]
    net = Net(session, incognito=incognito, cwd=cwd)
    if event == "SessionStart":
        machine = machine_fingerprint()
        context = net.call("reading the context", lambda c: c.context(machine=machine))
        if not incognito:
            net.drain()
        if not context:
            return None
        with turn_state(session) as state:
            served_add(state, context)
        text = context.get("text") or ""
        if not text.strip():
            return None
        return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
    if event == "UserPromptSubmit":
        prompt = str(payload.get("prompt") or "")
        if NOT_THE_USER.match(prompt):
            return None  # Claude Code's own message: the turn goes on, nothing is stored
        with turn_state(session) as state:
            # The person answers after an escalation: the blockers of that turn close.
            answered = state["outcome_id"] if state.get("escalated") else ""
            if state["open"]:  # a turn without a Stop (interrupted): close it first
                turn_outcome(state, project=project_fields(cwd=cwd), machine=machine_fingerprint())
            state["escalated"] = False
            turn_start(state, goal=prompt)
            if prompt.strip() and not incognito:
                outbox_put(
                    "turn",
                    {
                        "session_id": session,
                        "role": "user",
                        "content": prompt[:20000],
                        "turn_index": state["turn_index"],
                    },
                )
        if not incognito:
            if answered:
                net.call(
                    "closing the blockers the person answered",
                    lambda c: c.post_result(
                        answered, tool="", ok=True, user_answered=True, session_id=session
                    ),
                )
            net.drain()
        return None
    if event == "PreToolUse":
        tool = str(payload.get("tool_name") or "tool")
        subject = _subject(tool, payload.get("tool_input") or {})
        with turn_state(session) as state:
            ensure_open(state)
            state.setdefault("tool_started", {})[str(payload.get("tool_use_id"))] = time.time()
            text = state.get("escalations", {}).get(subject)
        if text:
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": text,
                }
            }
        return None
    if event in ("PostToolUse", "PostToolUseFailure"):
        with turn_state(session) as state:
            result = _tool_step(state, payload, failed=event == "PostToolUseFailure")
            turn_id = state["outcome_id"]
        if incognito:
            return None
        result.pop("step")
        result["machine"] = machine_fingerprint()
        answer = net.call("posting the tool result", lambda c: c.post_result(turn_id, **result))
        if answer is not None and outbox_size():
            net.drain()  # Cairn answers again: what any session kept goes now
        text = _escalation_text(answer)
        if not text:
            return None
        with turn_state(session) as state:
            subject = (answer.get("escalation") or {}).get("subject") or result["subject"]
            state.setdefault("escalations", {})[subject] = text
            state["escalations"][result["subject"]] = text
            state["escalated"] = True
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
    if event == "Stop":
        with turn_state(session) as state:
            if state["open"]:
                if checks:
                    run_declared_checks(state, checks, cwd=cwd, timeout=check_timeout)
                state.setdefault("tool_started", {}).clear()
                turn_outcome(state, project=project_fields(cwd=cwd), machine=machine_fingerprint())
        if not incognito:
            net.drain()
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
        help="a check the hook runs itself when a turn ends (test=, lint= or build=); "
        "also CAIRN_HOOK_CHECKS, one per line",
    )
    parser.add_argument("--check-timeout", type=float, default=600.0, help="seconds per check")
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
    install.load_harness_token()  # the token file, read here: never in the model's env
    try:
        payload = json.loads(sys.stdin.read() or "{}")
        output = handle(payload, checks=declared, check_timeout=options.check_timeout)
    except Exception as exc:  # noqa: BLE001 - a hook must never fail Claude Code
        warn(f"hook skipped: {exc.__class__.__name__}: {exc}")
        return 0
    if output is not None:
        print(json.dumps(output))
    return 0
