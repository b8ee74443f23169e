"""The action gate from the harness side (SPEC section 4a): before a command runs, ask
Cairn with the session's served ids, and turn the answer into what the loop shows.

``cairn-hook claude-code`` calls :func:`check` in ``PreToolUse`` for every Bash command
and answers Claude Code with ``permissionDecision: ask|deny`` and the reason
(:func:`claude_code_output`); ``cairn-turn check --command CMD`` does the same for other
loops (exit status :data:`EXIT_CODES`). The gate needs everything the model was shown:
the memory block's items too, not only the lessons and errors an outcome is attributed
to, so the session keeps its own list (``gate_served``).

When Cairn cannot be reached the command is not held up (the hook's rule: Cairn never
blocks the loop); the hook says so on stderr.
"""

from __future__ import annotations

from cairn_client.client import CairnError
from cairn_client.state import warn

EXIT_CODES = {"allow": 0, "ask": 10, "deny": 11}
GATE_SERVED_MAX = 500


def served_refs(answer: dict) -> list[str]:
    """Every item a ``/context/``, ``/lessons/check/`` or ``/recall/`` answer showed."""
    refs = [f"lesson:{x['id']}" for x in answer.get("lessons") or []]
    refs += [f"error:{x['id']}" for x in answer.get("errors") or []]
    refs += [f"knowledge:{x['id']}" for x in (answer.get("memory") or {}).get("items") or []]
    refs += [
        f"knowledge:{x['id']}"
        for x in answer.get("results") or []
        if x.get("kind", "knowledge") == "knowledge"
    ]
    return refs


def served_add(state: dict, answer: dict) -> None:
    """Keep what an answer showed the model, for every later gate call of the session."""
    kept = list(state.get("gate_served") or [])
    for ref in served_refs(answer or {}):
        if ref not in kept:
            kept.append(ref)
    state["gate_served"] = kept[-GATE_SERVED_MAX:]


def check(client, *, command: str, session_id: str, state: dict, **extra) -> dict:
    """``POST /actions/check/`` with the session's served ids."""
    return client.check_action(
        command, session_id=session_id, in_play=list(state.get("gate_served") or []), **extra
    )


def check_quietly(net, **kwargs) -> dict | None:
    """:func:`check` from a hook: a slow or failing gate lets the command run (with a
    line on stderr) and does not trip the session's breaker, so the turn's outcome is
    still sent at ``Stop``."""
    if not net.up:
        return None
    try:
        return check(net.client(), **kwargs)
    except CairnError as exc:
        warn(f"the action gate: {exc}; the command runs unchecked")
        return None


def reason_text(answer: dict) -> str:
    reasons = answer.get("reasons") or []
    lines = [f"- {r.get('why', '')}" for r in reasons]
    head = {
        "ask": "Cairn's action gate: this command reaches something only unverified text "
        "asked for. A person should decide:",
        "deny": "Cairn's action gate: a live blocker refuses this command:",
    }.get(answer.get("decision"), "")
    return "\n".join([head, *lines]) if head else ""


def claude_code_output(answer: dict | None) -> dict | None:
    """Claude Code's ``PreToolUse`` answer for a gate answer (None: let it run)."""
    if not isinstance(answer, dict) or answer.get("decision") not in ("ask", "deny"):
        return None
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": answer["decision"],
            "permissionDecisionReason": reason_text(answer),
        }
    }


def pending_add(state: dict, tool_use_id: str, answer: dict | None) -> None:
    """An ``ask`` waits for the person: if the tool then runs, they allowed it once."""
    if isinstance(answer, dict) and answer.get("decision") == "ask" and answer.get("check_id"):
        state.setdefault("gate_pending", {})[str(tool_use_id)] = answer["check_id"]


def pending_pop(state: dict, tool_use_id: str) -> int | None:
    return (state.get("gate_pending") or {}).pop(str(tool_use_id), None)
