"""The harness's local record of the current turn, one small JSON file per session.

``cairn-turn``, ``cairn-check`` and ``cairn-hook`` append steps and checks to it
while the turn runs; ending the turn posts it as one outcome with the harness token.
An outcome the server could not take stays in ``pending`` and is sent later, so a
network failure never loses a turn or changes a wrapped command's exit code.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path

from cairn_client.client import Cairn, CairnError


def state_dir() -> Path:
    base = os.environ.get("CAIRN_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "cairn"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def session_id(explicit: str | None = None) -> str:
    return explicit or os.environ.get("CAIRN_SESSION") or "default"


def _path(session: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", session)[:120] or "default"
    return state_dir() / f"{safe}.json"


def _empty(session: str) -> dict:
    return {
        "session_id": session,
        "turn_index": -1,
        "open": False,
        "outcome_id": "",
        "goal": "",
        "approach": [],
        "checks": [],
        "tool_calls": [],
        "in_play": [],
        "step": 0,
        "started_at": None,
        "pending": [],
        "pending_tool_calls": [],
    }


@contextlib.contextmanager
def turn_state(session: str):
    """The session's state, locked for the duration of the block and saved after it."""
    path = _path(session)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            state = json.loads(path.read_text()) if path.exists() else _empty(session)
        except (OSError, ValueError):
            state = _empty(session)
        yield state
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, path)


GOAL_TEXT_MAX_CHARS = 1000


def share_goal_default() -> bool:
    """``CAIRN_SHARE_GOAL=1``: send the goal in words (``goal_text``) with each outcome.
    The server keeps it only where the workspace opted in; elsewhere only its digest."""
    return os.environ.get("CAIRN_SHARE_GOAL", "").strip().lower() in ("1", "true", "yes", "on")


def turn_start(
    state: dict, *, goal: str = "", in_play: list | None = None, share_goal: bool | None = None
) -> None:
    state.update(
        share_goal=share_goal_default() if share_goal is None else share_goal,
        open=True,
        turn_index=state["turn_index"] + 1,
        outcome_id=f"{state['session_id']}-{state['turn_index'] + 1}-{uuid.uuid4().hex[:8]}",
        goal=goal,
        approach=[],
        checks=[],
        tool_calls=[],
        in_play=list(in_play or []),
        step=0,
        started_at=time.time(),
    )


def ensure_open(state: dict) -> None:
    if not state["open"]:
        turn_start(state)


def step_add(
    state: dict, *, operation_key: str, target: str = "", outcome: str = "ok", mutated: bool = False
) -> int:
    ensure_open(state)
    state["step"] += 1
    state["approach"].append(
        {
            "operation_key": operation_key[:200],
            "target": target[:300],
            "outcome": outcome,
            "step": state["step"],
            "mutated": mutated,
        }
    )
    return state["step"]


def check_add(
    state: dict,
    *,
    kind: str,
    label: str,
    target: str,
    exit_code: int | None,
    duration_s: float | None,
    ran: bool = True,
) -> int:
    ensure_open(state)
    state["step"] += 1
    state["checks"].append(
        {
            "kind": kind,
            "label": label[:200],
            "target": target[:300],
            "ran": ran,
            "exit_code": exit_code,
            "step": state["step"],
            "duration_s": None if duration_s is None else round(duration_s, 3),
        }
    )
    return state["step"]


def turn_outcome(state: dict, *, claim_ok: bool = True, in_play: list | None = None) -> dict:
    """The outcome body for the open turn; closes the turn."""
    body = {
        "outcome_id": state["outcome_id"],
        "session_id": state["session_id"],
        "turn_index": max(state["turn_index"], 0),
        "approach": state["approach"],
        "checks": state["checks"],
        "claim_ok": claim_ok,
        "steps": state["step"],
        "wall_s": round(time.time() - (state["started_at"] or time.time()), 3),
        "in_play": list(dict.fromkeys([*state["in_play"], *(in_play or [])])),
    }
    if state["goal"]:
        body["goal"] = state["goal"]
        if state.get("share_goal"):
            body["goal_text"] = state["goal"].strip()[:GOAL_TEXT_MAX_CHARS]
    state["pending"].append(body)
    if state["tool_calls"]:
        state["pending_tool_calls"].append(state["tool_calls"])
    state.update(open=False, approach=[], checks=[], tool_calls=[], in_play=[], step=0)
    return body


def harness_client(**kwargs) -> Cairn:
    """A client on the harness token (``CAIRN_HARNESS_TOKEN``, else ``CAIRN_TOKEN``)."""
    token = os.environ.get("CAIRN_HARNESS_TOKEN") or os.environ.get("CAIRN_TOKEN")
    return Cairn(token=token, retries=kwargs.pop("retries", 2), **kwargs)


def flush(state: dict, client: Cairn | None = None) -> list[dict]:
    """Send pending tool calls and outcomes; what fails stays pending. Returns the
    server's answers for the outcomes sent. Never raises for a network failure."""
    answers = []
    try:
        client = client or harness_client()
    except CairnError as exc:
        warn(f"{exc}; the turn is kept and sent later")
        return answers
    while state["pending_tool_calls"]:
        try:
            client.log_tool_calls(state["pending_tool_calls"][0])
        except CairnError as exc:
            if exc.status is None or exc.status >= 500:
                warn(f"could not send tool calls ({exc}); kept and sent later")
                return answers
            warn(f"tool calls refused: {exc}")
        state["pending_tool_calls"].pop(0)
    while state["pending"]:
        body = state["pending"][0]
        try:
            answers.append(client.post_outcome(body))
        except CairnError as exc:
            if exc.status is None or exc.status >= 500:
                warn(f"could not send outcome {body['outcome_id']} ({exc}); kept and sent later")
                return answers
            warn(f"outcome {body['outcome_id']} refused: {exc}")
        state["pending"].pop(0)
    return answers


def warn(message: str) -> None:
    print(f"cairn: {message}", file=sys.stderr)
