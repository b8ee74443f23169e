"""``cairn-hook claude-code``: Claude Code's hook JSON on stdin → Cairn, as the harness.

Claude Code runs hooks itself (the model never sees the harness token), so what they
report is what really happened:

- ``SessionStart``: prints the plan-time context (``GET /context/``) as
  ``additionalContext``, so Claude Code adds lessons and known errors to the session.
- ``UserPromptSubmit``: opens a turn and stores the user's prompt as a turn.
- ``PreToolUse``: notes when a tool started (for durations).
- ``PostToolUse`` / ``PostToolUseFailure``: one approach step per tool call; Bash
  commands that match the check patterns (pytest, npm test, cargo test, ruff, eslint,
  tsc …) also become checks with their real exit status.
- ``Stop``: posts the turn's outcome and its tool calls.

A hook never blocks Claude Code: failures are one line on stderr and exit 0; what
could not be sent is kept and sent with the next turn.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time

from cairn_client import install
from cairn_client.client import CairnError
from cairn_client.project import project_fields
from cairn_client.state import (
    check_add,
    ensure_open,
    flush,
    harness_client,
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
SUBCOMMAND_PROGRAMS = {
    "pip",
    "uv",
    "npm",
    "pnpm",
    "yarn",
    "git",
    "cargo",
    "go",
    "make",
    "docker",
    "poetry",
}


def check_patterns() -> dict[str, list[re.Pattern]]:
    raw = os.environ.get("CAIRN_CHECK_PATTERNS")
    patterns = json.loads(raw) if raw else DEFAULT_CHECK_PATTERNS
    return {kind: [re.compile(p) for p in items] for kind, items in patterns.items()}


def check_kind(command: str) -> str | None:
    for kind, patterns in check_patterns().items():
        if any(p.search(command.strip()) for p in patterns):
            return kind
    return None


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def bash_operation(command: str) -> tuple[str, str]:
    """``pip install -r requirements.txt`` → (``pip:install``, ``requirements.txt``)."""
    words = [w for w in _words(command) if "=" not in w or w.startswith("-")]
    if not words:
        return "bash", ""
    program = os.path.basename(words[0])
    rest = words[1:]
    if program in ("python", "python3") and rest[:1] == ["-m"] and len(rest) > 1:
        program, rest = rest[1], rest[2:]
    operation = program
    if program in SUBCOMMAND_PROGRAMS and rest and not rest[0].startswith("-"):
        operation = f"{program}:{rest[0]}"
        rest = rest[1:]
    target = next((w for w in reversed(rest) if not w.startswith("-")), "")
    return operation, target


def _exit_code(payload: dict) -> int | None:
    response = payload.get("tool_response")
    if isinstance(response, dict):
        for key in ("exit_code", "exitCode", "returncode", "return_code"):
            if isinstance(response.get(key), int):
                return response[key]
        if response.get("interrupted") or response.get("is_error"):
            return 1
    return None


def _tool_step(state: dict, payload: dict, *, failed: bool) -> None:
    tool = str(payload.get("tool_name") or "tool")
    tool_input = payload.get("tool_input") or {}
    code = _exit_code(payload)
    ok = not failed and (code is None or code == 0)
    if tool == "Bash":
        command = str(tool_input.get("command") or "")
        operation, target = bash_operation(command)
        operation = f"bash:{operation}"
    else:
        operation = tool.lower() if not tool.startswith("mcp__") else tool
        target = str(
            tool_input.get("file_path") or tool_input.get("path") or tool_input.get("url") or ""
        )
    started = state.setdefault("tool_started", {}).pop(str(payload.get("tool_use_id")), None)
    step_add(
        state,
        operation_key=operation,
        target=os.path.relpath(target, payload.get("cwd") or os.getcwd())
        if target.startswith("/")
        else target,
        outcome="ok" if ok else "failed",
        mutated=tool in MUTATING_TOOLS,
    )
    if tool == "Bash":
        kind = check_kind(command)
        if kind:
            check_add(
                state,
                kind=kind,
                label=operation.removeprefix("bash:"),
                target=target,
                exit_code=0 if ok else (code if code not in (None, 0) else 1),
                duration_s=None if started is None else time.time() - started,
            )
    error = str(payload.get("error") or "") if not ok else ""
    state["tool_calls"].append(
        {
            "session_id": state["session_id"],
            "tool": tool[:100],
            "operation_key": operation,
            "ok": ok,
            **({"error": error[:2000]} if error else {}),
            **({"duration_ms": int((time.time() - started) * 1000)} if started else {}),
        }
    )


def handle(payload: dict) -> dict | None:
    """One hook event; returns the JSON to print for Claude Code (or None)."""
    event = payload.get("hook_event_name")
    session = str(payload.get("session_id") or os.environ.get("CAIRN_SESSION") or "claude-code")
    if event == "SessionStart":
        client = harness_client()
        fields = project_fields(cwd=payload.get("cwd"))
        client.project_remote = fields.get("project_remote")
        client.project_path = fields.get("project_path")
        context = client.context()
        text = context.get("text") or ""
        if not text.strip():
            return None
        return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
    with turn_state(session) as state:
        if event == "UserPromptSubmit":
            if state["open"]:  # a turn without a Stop (interrupted): close it first
                turn_outcome(state)
            turn_start(state, goal=str(payload.get("prompt") or ""))
            prompt = str(payload.get("prompt") or "")
            if prompt.strip():
                try:
                    harness_client().store_turn(
                        session, role="user", content=prompt[:20000], turn_index=state["turn_index"]
                    )
                except CairnError as exc:
                    warn(f"could not store the prompt: {exc}")
        elif event == "PreToolUse":
            ensure_open(state)
            state.setdefault("tool_started", {})[str(payload.get("tool_use_id"))] = time.time()
        elif event in ("PostToolUse", "PostToolUseFailure"):
            _tool_step(state, payload, failed=event == "PostToolUseFailure")
        elif event == "Stop":
            if state["open"]:
                state.setdefault("tool_started", {}).clear()
                turn_outcome(state)
            cwd = payload.get("cwd")
            client = harness_client()
            fields = project_fields(cwd=cwd)
            client.project_remote = fields.get("project_remote")
            client.project_path = fields.get("project_path")
            flush(state, client)
    return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["install"]:
        return install.main(args[1:])
    if args[:1] != ["claude-code"]:
        print(
            "usage: cairn-hook claude-code < hook-payload.json\n"
            "       cairn-hook install claude-code [--project DIR] [--url URL]",
            file=sys.stderr,
        )
        return 2
    install.load_harness_token()  # the token file, read here: never in the model's env
    try:
        payload = json.loads(sys.stdin.read() or "{}")
        output = handle(payload)
    except (CairnError, OSError, ValueError) as exc:
        warn(f"hook skipped: {exc}")
        return 0
    if output is not None:
        print(json.dumps(output))
    return 0
