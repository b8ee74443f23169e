"""The harness CLI: ``cairn-check`` wraps a check command, ``cairn-turn`` opens,
steps and ends a turn. The model never runs these: the process that runs the tools
does, with the harness token, so the exit codes Cairn sees are real.

    cairn-turn start --goal "fix the cart tests"
    cairn-turn step pip:install --target requirements.txt --failed
    cairn-turn step uv:pip-install --target requirements.txt
    cairn-turn step --command "uv pip install -r requirements.txt"   # named as the hook does
    cairn-check --label tests --kind test -- pytest -q
    cairn-turn end

``cairn-turn context`` and ``cairn-turn check OPERATION`` read what Cairn knows
(``/context/``, ``/lessons/check/``) and keep what they served for the session: each
outcome then sends it as ``in_play``, so a lesson followed and passed is confirmed and
one followed and failed is contradicted. ``--incognito`` (or ``CAIRN_INCOGNITO=1``)
makes the whole session incognito: nothing is sent, reads are not counted as use.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version

from cairn_client import gate, opkeys
from cairn_client.client import CairnError
from cairn_client.project import machine_fingerprint, project_fields
from cairn_client.state import (
    check_add,
    flush,
    harness_client,
    incognito_default,
    served_add,
    session_id,
    step_add,
    turn_outcome,
    turn_start,
    turn_state,
    warn,
)

KINDS = ("test", "lint", "build")
LINT_TOOLS = {"ruff", "eslint", "flake8", "pylint", "mypy", "black", "prettier", "golangci-lint"}
BUILD_TOOLS = {"tsc", "webpack", "vite", "gcc", "cc", "javac"}


def guess_kind(argv: list[str]) -> str:
    program = os.path.basename(argv[0]) if argv else ""
    words = set(argv[:3])
    if program in LINT_TOOLS or "lint" in words:
        return "lint"
    if program in BUILD_TOOLS or "build" in words:
        return "build"
    return "test"


def _version() -> str:
    try:
        return version("cairn-client")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "unknown"


# --help prints this as it is: plain words, not the docstring's reST markup.
CHECK_DESCRIPTION = (
    "Run CMD with its output streamed unchanged, exit with its exit code, and add a "
    "check record to the session's current turn (kept locally; cairn-turn end sends it)."
)


def check_main(argv: list[str] | None = None) -> int:
    """``cairn-check [--label L] [--kind test|lint|build] [--target PATH] -- CMD ARGS…``:
    run CMD with its output streamed unchanged, exit with its exit code, and append a
    check record to the session's current turn (local; sent when the turn ends)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" in args:
        split = args.index("--")
        own, command = args[:split], args[split + 1 :]
    elif args[:1] and args[0].startswith("-"):
        # Its own options only (``--help``, ``--version``, or a forgotten ``--``):
        # argparse answers them, never a command named ``--help``.
        own, command = args, []
    else:
        own, command = [], args
    parser = argparse.ArgumentParser(
        prog="cairn-check",
        description=CHECK_DESCRIPTION,
        usage="cairn-check [--label L] [--kind test|lint|build] [--target PATH] -- CMD ARGS…",
    )
    parser.add_argument("--version", action="version", version=f"cairn-check {_version()}")
    parser.add_argument("--label", default="")
    parser.add_argument("--kind", choices=KINDS)
    parser.add_argument("--target", default="")
    parser.add_argument("--session", default=None)
    options = parser.parse_args(own)
    if not command:
        parser.error("give the command after --, e.g. cairn-check -- pytest -q")
    started = time.monotonic()
    try:
        exit_code = subprocess.call(command)
    except FileNotFoundError:
        print(f"cairn-check: {command[0]}: command not found", file=sys.stderr)
        exit_code = 127
    duration = time.monotonic() - started
    try:
        with turn_state(session_id(options.session)) as state:
            check_add(
                state,
                kind=options.kind or guess_kind(command),
                label=options.label or os.path.basename(command[0]),
                target=options.target,
                exit_code=exit_code,
                duration_s=duration,
            )
    except OSError as exc:  # a broken state dir never changes the command's exit code
        warn(f"could not record the check: {exc}")
    return exit_code


def turn_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="cairn-turn",
        description="Keep the current turn's approach and checks; `end` posts the outcome "
        "with the harness token (CAIRN_HARNESS_TOKEN, else CAIRN_TOKEN).",
    )
    parser.add_argument("--version", action="version", version=f"cairn-turn {_version()}")
    parser.add_argument("--session", default=None, help="default: $CAIRN_SESSION")
    parser.add_argument(
        "--incognito",
        action="store_true",
        help="make the whole session incognito: nothing is sent to Cairn and reads are not "
        "counted (default: $CAIRN_INCOGNITO)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="open a new turn")
    start.add_argument("--goal", default="")
    start.add_argument(
        "--share-goal",
        action="store_true",
        default=None,
        help="also send the goal in words (goal_text); kept only where the workspace opted "
        "in, elsewhere only its digest (default: $CAIRN_SHARE_GOAL)",
    )
    start.add_argument("--in-play", nargs="*", default=[], help="e.g. lesson:12 knowledge:40")
    step = sub.add_parser("step", help="record one step of the approach")
    step.add_argument("operation_key", nargs="?", default=None)
    step.add_argument(
        "--command",
        dest="command_line",
        default=None,
        help="the command line the step ran: its operation key and target are named as "
        "cairn-hook names a Bash command's (cairn_client.opkeys), so lessons are shared",
    )
    step.add_argument("--target", default=None)
    result = step.add_mutually_exclusive_group()
    result.add_argument("--failed", action="store_true")
    result.add_argument("--refused", action="store_true")
    step.add_argument("--mutated", action="store_true", help="the step changed files")
    end = sub.add_parser("end", help="post the turn's outcome")
    end.add_argument("--in-play", nargs="*", default=[])
    end.add_argument(
        "--claim-wrong",
        action="store_true",
        help="the answer misreported its checks (the turn does not pass)",
    )
    sub.add_parser(
        "context", help="print the plan-time context and keep what it served for the session"
    )
    check = sub.add_parser(
        "check",
        help="print what Cairn knows about an operation and keep what it served; with "
        "--command, ask the action gate whether that command may run (exit 0 allow, "
        "10 ask a person, 11 deny)",
    )
    check.add_argument("operation_key", nargs="?", default="", help="e.g. pip:install")
    check.add_argument("--command", dest="gate_command", default="", help="a shell command")
    sub.add_parser("flush", help="send outcomes kept after a failure to reach the server")
    sub.add_parser("status", help="print the current turn")
    options = parser.parse_args(sys.argv[1:] if argv is None else argv)
    with turn_state(session_id(options.session)) as state:
        if options.incognito or incognito_default():
            state["incognito"] = True
        if options.command == "start":
            turn_start(
                state, goal=options.goal, in_play=options.in_play, share_goal=options.share_goal
            )
            print(state["outcome_id"])
        elif options.command == "step":
            outcome = "failed" if options.failed else "refused" if options.refused else "ok"
            key, target = _step_key(parser, options)
            step_add(
                state,
                operation_key=key,
                target=target,
                outcome=outcome,
                mutated=options.mutated,
            )
        elif options.command == "check" and options.gate_command:
            return _gate(state, options)
        elif options.command in ("context", "check"):
            if options.command == "check" and not options.operation_key:
                parser.error("check needs an OPERATION_KEY or --command")
            return _read(state, options)
        elif options.command == "end":
            if state["open"]:
                turn_outcome(
                    state,
                    claim_ok=not options.claim_wrong,
                    in_play=options.in_play,
                    project=project_fields(),
                    machine=machine_fingerprint(),
                )
            if state["incognito"]:
                print("incognito: nothing sent")
            for answer in flush(state):
                _print_answer(answer)
        elif options.command == "flush":
            for answer in flush(state):
                _print_answer(answer)
        else:
            print(json.dumps(state, indent=2))
    return 0


def _step_key(parser, options) -> tuple[str, str]:
    """The step's (operation key, target): given, or named from ``--command``."""
    if (options.operation_key is None) == (options.command_line is None):
        parser.error("step: give an OPERATION_KEY or --command, not both")
    if options.command_line is not None:
        key, target = opkeys.operation(shlex.split(options.command_line))
        key = f"bash:{key}"
    else:
        key, target = options.operation_key, ""
    return key, target if options.target is None else options.target


def _read(state: dict, options) -> int:
    try:
        client = harness_client(incognito=bool(state["incognito"]))
        if options.command == "context":
            answer = client.context(machine=machine_fingerprint())
        else:
            answer = client.lessons_check(options.operation_key, machine=machine_fingerprint())
    except CairnError as exc:
        warn(str(exc))
        return 1
    served_add(state, answer)
    gate.served_add(state, answer)
    print(answer.get("text") or "nothing known yet")
    return 0


def _gate(state: dict, options) -> int:
    """``cairn-turn check --command CMD``: the action gate for loops without hooks."""
    try:
        client = harness_client(incognito=bool(state["incognito"]))
        fields = project_fields()
        client.project_remote = fields.get("project_remote")
        client.project_path = fields.get("project_path")
        answer = gate.check(
            client, command=options.gate_command, session_id=state["session_id"], state=state
        )
    except CairnError as exc:
        warn(f"the action gate: {exc}")
        return 1
    print(answer["decision"])
    text = gate.reason_text(answer)
    if text:
        print(text)
    if answer.get("check_id"):
        print(f"check_id: {answer['check_id']}")
    return gate.EXIT_CODES[answer["decision"]]


def _print_answer(answer: dict) -> None:
    print(_summary(answer))
    if answer.get("evidence") != "verified" and answer.get("hint"):
        print(f"hint: {answer['hint']}")


def _summary(answer: dict) -> str:
    parts = [f"outcome {answer.get('outcome_id')}: passed={json.dumps(answer.get('passed'))}"]
    for key in ("confirmed", "contradicted", "lessons_created"):
        if answer.get(key):
            parts.append(f"{key}={json.dumps(answer[key])}")
    return " · ".join(parts)
