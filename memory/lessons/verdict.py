"""Did a turn pass? Pure rules over an outcome's raw records (no database): the
latest run per check identity, stale checks, the honest-claim rule, and the
fail-then-ok operation pairs that mechanical lessons learn from."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.conf import settings

from memory.models import (
    StepOutcome,
)


@dataclass(frozen=True)
class Verdict:
    """Why a turn passed or not: the inputs of each rule, kept for the review UI.

    ``latest`` holds the latest run of each check identity, in first-seen order;
    ``failing`` and ``stale`` are the subsets that made the turn fail.
    """

    passed: bool | None
    ran: list[dict]
    not_run: list[dict]
    latest: list[dict]
    failing: list[dict]
    stale: list[dict]
    last_mutation: int | None
    claim_ok: bool


def check_identity(check: dict) -> tuple:
    return (check.get("kind"), check.get("label", ""), check.get("target", ""))


def outcome_verdict(*, approach: list[dict], checks: list[dict], claim_ok: bool) -> Verdict:
    """Did the turn pass, by its raw records? The one place these rules live.

    1. Ignore checks that did not run. None ran (or none given): ``None`` —
       nothing was verified, so nothing is confirmed or contradicted.
    2. Per check identity (kind, label, target) keep only the latest run (by
       step; two runs at the same step: a failure wins, since which ran last
       cannot be told).
    3. A latest run at or before the last mutating step is stale: at the same step,
       which came first cannot be told, so the check does not prove the edit.
    4. Passed = every latest run exited 0, none is stale, and the answer's
       claim about its checks was honest (``claim_ok``).
    """
    ran = [c for c in checks if c.get("ran")]
    not_run = [c for c in checks if not c.get("ran")]
    latest: dict[tuple, dict] = {}
    for check in ran:
        key = check_identity(check)
        held = latest.get(key)
        if held is None or check["step"] > held["step"]:
            latest[key] = check
        elif check["step"] == held["step"] and held.get("exit_code") == 0:
            latest[key] = check  # a tie: keep a failing run if either failed
    mutating_steps = [a["step"] for a in approach if a.get("mutated")]
    last_mutation = max(mutating_steps) if mutating_steps else None
    failing = [c for c in latest.values() if c.get("exit_code") != 0]
    stale = [c for c in latest.values() if last_mutation is not None and c["step"] <= last_mutation]
    if not ran:
        passed = None
    elif failing or stale:
        passed = False
    else:
        passed = bool(claim_ok)
    return Verdict(
        passed=passed,
        ran=ran,
        not_run=not_run,
        latest=list(latest.values()),
        failing=failing,
        stale=stale,
        last_mutation=last_mutation,
        claim_ok=bool(claim_ok),
    )


def outcome_passed(*, approach: list[dict], checks: list[dict], claim_ok: bool) -> bool | None:
    """The server's verdict (see ``outcome_verdict`` for the rules)."""
    return outcome_verdict(approach=approach, checks=checks, claim_ok=claim_ok).passed


def operations_last_result(approach: list[dict]) -> dict[str, str]:
    """Each operation's final result in the turn (ok / failed / refused), in step order."""
    result: dict[str, str] = {}
    for item in sorted(approach, key=lambda a: a["step"]):
        result[item["operation_key"]] = item["outcome"]
    return result


# The tools a harness records by name (``read``, ``edit``...) rather than as a command it
# ran: how an agent looks at and changes files, never an alternative to a command.
# The hook records a Bash command as ``bash:<operation>``, ``cairn-turn`` and other
# harnesses as the operation itself; an MCP tool as ``mcp__<server>__<tool>``.
FILE_TOOLS = frozenset(
    {
        "read", "edit", "write", "multiedit", "notebookedit", "notebookread", "grep", "glob",
        "ls", "webfetch", "websearch", "todowrite", "task", "exitplanmode", "bashoutput",
        "killshell", "apply_patch", "view_image", "update_plan",
    }
)  # fmt: skip


def is_command(step: dict) -> bool:
    """Whether an approach step ran a command that acts (SPEC section 4: only those are
    the A and B of a mechanical lesson). Decided by the tool the harness recorded: a
    Bash command (``bash:``) is one; a file tool (``FILE_TOOLS``), an MCP tool, or a step
    the harness marked as an edit of a file (``mutated`` with a file tool's key) is not."""
    key = str(step.get("operation_key") or "")
    if key.startswith("bash:"):
        return True
    if key.startswith("mcp__"):
        return False
    return key.split(":", 1)[0].lower() not in FILE_TOOLS


def mechanical_pairs(approach: list[dict]) -> list[tuple[str, str, str]]:
    """(failed op A, ok op B, target T): command A failed on T and later in the turn
    command B worked on T. Reads, searches and edits are never A or B."""
    failed_on: dict[str, list[str]] = {}
    pairs: list[tuple[str, str, str]] = []
    for item in sorted(approach, key=lambda a: a["step"]):
        target = item.get("target") or ""
        if not target or not is_command(item):
            continue
        op = item["operation_key"]
        if item["outcome"] == StepOutcome.FAILED:
            failed_on.setdefault(target, [])
            if op not in failed_on[target]:
                failed_on[target].append(op)
        elif item["outcome"] == StepOutcome.OK:
            for failed_op in failed_on.get(target, []):
                pair = (failed_op, op, target)
                if failed_op != op and pair not in pairs:
                    pairs.append(pair)
    return pairs


def goal_digest(goal: str) -> str:
    """sha256 of the first 200 characters of the goal; the goal itself is not stored."""
    return hashlib.sha256(goal[: settings.CAIRN_GOAL_DIGEST_CHARS].encode()).hexdigest()
