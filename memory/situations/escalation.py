"""The escalation contract, built deterministically from fields. Pure.

    Blocked: gh: gh is installed but not signed in.
    To unblock: run `gh auth login`, then ask me again.
    Meanwhile I can:

The first two lines come from the situation's fields (the second only for a
declared situation with an ``unblock``); the third is left for the agent to
complete from what it already has. Nothing here is model text.
"""

from __future__ import annotations

from memory.situations.taxonomy import DECLARED

_PHRASES = {
    "auth": "is not signed in on this machine",
    "not_installed": "is not installed on this machine",
    "permission": "is not permitted here",
    "quota": "hit a rate limit or quota",
    "offline": "cannot reach the network",
    "locked": "is locked by another process",
}

MEANWHILE = "Meanwhile I can:"


def blocked_line(blocker: dict) -> str:
    subject = blocker["subject"]
    detail = (blocker.get("detail") or "").strip()
    if detail:
        return f"Blocked: {subject}: {detail}"
    phrase = _PHRASES.get(blocker["kind"], f"needs the user ({blocker['kind']})")
    return f"Blocked: {subject} {phrase}."


def unblock_line(blocker: dict) -> str:
    if blocker.get("source") != DECLARED or not blocker.get("unblock"):
        return ""
    return f"To unblock: run `{blocker['unblock']}`, then ask me again."


def escalation_build(
    blocker: dict, *, steps_since_detect: int, seconds_since_detect: float, lesson_id=None
) -> dict:
    lines = [blocked_line(blocker), unblock_line(blocker), MEANWHILE]
    return {
        "subject": blocker["subject"],
        "kind": blocker["kind"],
        "source": blocker["source"],
        "interactive": bool(blocker.get("interactive")),
        "blocked": lines[0],
        "unblock": lines[1],
        "meanwhile": MEANWHILE,
        "text": "\n".join(line for line in lines if line),
        "steps_since_detect": steps_since_detect,
        "seconds_since_detect": round(seconds_since_detect, 3),
        "lesson_id": lesson_id,
    }


def cost_line(*, subject: str, steps: int | None, seconds: float | None) -> str:
    """'12 steps · 94 s after gh was blocked, before asking' (the outcome page)."""
    step_word = "step" if steps == 1 else "steps"
    return f"{steps or 0} {step_word} · {round(seconds or 0)} s after {subject} was blocked, before asking"
