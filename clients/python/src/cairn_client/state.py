"""The harness's local record of the current turn, one small JSON file per session.

``cairn-turn``, ``cairn-check`` and ``cairn-hook`` append steps and checks to it
while the turn runs; ending the turn posts it as one outcome with the harness token.

What the session was served (the lessons and known errors ``/context/`` and
``/lessons/check/`` returned) is kept for the whole session and sent as ``in_play``
with each outcome: the server confirms or contradicts only what it was told was in
play.

Every write (an outcome, its tool calls, a prompt) goes through one outbox shared by
all sessions (``outbox/`` in the state directory, one file each, sent oldest first
with its own idempotency key): whatever could not be sent is sent by the next hook or
``cairn-turn`` run of *any* session once Cairn answers, so a network failure never
loses a turn or a prompt, nor changes a wrapped command's exit code.

A per-session circuit breaker (``breaker/``) remembers a failure to reach Cairn for
``CAIRN_BREAKER_S`` seconds (30): later hooks of that session skip the network then
instead of waiting on it again.
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
        "served": [],
        "incognito": False,
        "escalations": {},
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
        state = {**_empty(session), **state}  # a file written by an older client
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


def turn_outcome(
    state: dict,
    *,
    claim_ok: bool = True,
    in_play: list | None = None,
    project: dict | None = None,
    machine: str = "",
) -> dict:
    """The outcome body for the open turn, put in the outbox (unless the session is
    incognito: then nothing leaves the machine); closes the turn. ``in_play``: what
    the session was served, and what the caller adds."""
    refs = [*state["in_play"], *state.get("served", []), *(in_play or [])]
    body = {
        **(project or {}),
        "outcome_id": state["outcome_id"],
        "session_id": state["session_id"],
        "turn_index": max(state["turn_index"], 0),
        "approach": state["approach"],
        "checks": state["checks"],
        "claim_ok": claim_ok,
        "steps": state["step"],
        "wall_s": round(time.time() - (state["started_at"] or time.time()), 3),
        "in_play": _unique_refs(refs),
    }
    if machine:
        body["machine"] = machine
    if state["goal"]:
        body["goal"] = state["goal"]
        if state.get("share_goal"):
            body["goal_text"] = state["goal"].strip()[:GOAL_TEXT_MAX_CHARS]
    if not state.get("incognito"):
        if state["tool_calls"]:
            outbox_put("tool_calls", {"calls": state["tool_calls"]})
        outbox_put("outcome", body)
    state.update(open=False, approach=[], checks=[], tool_calls=[], in_play=[], step=0)
    state["escalations"] = {}
    return body


def _ref(value) -> dict | None:
    if isinstance(value, dict) and value.get("type") and value.get("id") is not None:
        return {"type": str(value["type"]), "id": int(value["id"])}
    if isinstance(value, str) and ":" in value:
        kind, _, raw = value.partition(":")
        if raw.strip().isdigit():
            return {"type": kind.strip(), "id": int(raw)}
    return None


def _unique_refs(values) -> list[dict]:
    seen, refs = set(), []
    for value in values:
        ref = _ref(value)
        if ref is not None and (ref["type"], ref["id"]) not in seen:
            seen.add((ref["type"], ref["id"]))
            refs.append(ref)
    return refs


def served_add(state: dict, answer: dict) -> list[dict]:
    """Keep what a ``/context/`` or ``/lessons/check/`` answer served for the session:
    its lessons and its known errors (each warns about one operation, so the outcome's
    approach says whether it held). The memory block's facts are left out: the server
    would credit every fact shown with every passed turn, used or not."""
    new = [{"type": "lesson", "id": lesson["id"]} for lesson in answer.get("lessons") or []]
    new += [{"type": "error", "id": error["id"]} for error in answer.get("errors") or []]
    new = [ref for ref in new if isinstance(ref["id"], int)]
    state["served"] = _unique_refs([*state.get("served", []), *new])
    return new


def incognito_default() -> bool:
    """``CAIRN_INCOGNITO=1``: the whole session is incognito."""
    return os.environ.get("CAIRN_INCOGNITO", "").strip().lower() in ("1", "true", "yes", "on")


# -- the client a harness process uses

# A hook's network time. The budget is what a hook aims at: an answer slower than it is
# used and reported as slow ("1.4 s over the 2 s budget"). The limit is when the hook
# stops waiting: no answer by then is "slow or hung", and the session's breaker opens.
# 2 s: on a 2-core machine under load a warm Cairn answers /context/ in well under a
# second but a cold or busy one takes over 1 s (the old 1 s budget called that
# "unreachable"); 4 s keeps a hung Cairn's cost per session to one hook's wait, far
# under Claude Code's 10 s hook timeout.
HOOK_BUDGET_S = 2.0
HOOK_LIMIT_S = 4.0
CONNECT_TIMEOUT_S = 0.3


def harness_client(**kwargs) -> Cairn:
    """A client on the harness token (``CAIRN_HARNESS_TOKEN``, else ``CAIRN_TOKEN``).
    ``budget``: seconds from now after which it starts and waits on nothing (hooks)."""
    token = os.environ.get("CAIRN_HARNESS_TOKEN") or os.environ.get("CAIRN_TOKEN")
    budget = kwargs.pop("budget", None)
    if budget is not None:
        kwargs.setdefault("deadline", time.monotonic() + budget)
        kwargs.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        kwargs.setdefault("timeout", budget)
        kwargs.setdefault("retries", 0)
    return Cairn(
        token=token,
        retries=kwargs.pop("retries", 2),
        token_variable="CAIRN_HARNESS_TOKEN",
        from_shell=True,
        **kwargs,
    )


def hook_budget() -> float:
    """``CAIRN_HOOK_BUDGET_S`` (2): answers slower than this are reported as slow."""
    try:
        return max(0.2, float(os.environ.get("CAIRN_HOOK_BUDGET_S") or HOOK_BUDGET_S))
    except ValueError:
        return HOOK_BUDGET_S


def hook_limit() -> float:
    """``CAIRN_HOOK_LIMIT_S`` (4, never under the budget): when a hook stops waiting."""
    try:
        limit = float(os.environ.get("CAIRN_HOOK_LIMIT_S") or 0)
    except ValueError:
        limit = 0.0
    budget = hook_budget()
    return max(budget, limit or max(HOOK_LIMIT_S, budget * 2))


# -- the circuit breaker


def _breaker_path(session: str) -> Path:
    path = state_dir() / "breaker"
    path.mkdir(exist_ok=True)
    return path / _path(session).name


def breaker_open(session: str) -> bool:
    """Whether Cairn failed this session less than ``CAIRN_BREAKER_S`` seconds ago."""
    try:
        until = float(_breaker_path(session).read_text())
    except (OSError, ValueError):
        return False
    return time.time() < until


def breaker_trip(session: str) -> None:
    try:
        seconds = float(os.environ.get("CAIRN_BREAKER_S") or 30)
    except ValueError:
        seconds = 30.0
    with contextlib.suppress(OSError):
        _breaker_path(session).write_text(str(time.time() + seconds))


def breaker_reset(session: str) -> None:
    with contextlib.suppress(OSError):
        _breaker_path(session).unlink()


def down(exc: CairnError) -> bool:
    """Cairn did not answer (or answered 5xx/408/429): try again later."""
    return exc.status is None or exc.status >= 500 or exc.status in (408, 429)


# -- the outbox, shared by every session

SENDERS = {
    "outcome": lambda client, body, key: client.request(
        "outcome_create", json=body, idempotency_key=key
    ),
    "tool_calls": lambda client, body, key: client.request(
        "tool_calls_log", json=body, idempotency_key=key
    ),
    "turn": lambda client, body, key: client.request(
        "session_turn_store",
        path={"session_id": body["session_id"]},
        json={k: v for k, v in body.items() if k != "session_id"},
        idempotency_key=key,
    ),
}


def _outbox() -> Path:
    path = state_dir() / "outbox"
    path.mkdir(exist_ok=True)
    return path


def outbox_put(kind: str, body: dict) -> Path:
    """Keep one write to send (oldest first) with the key its every attempt carries."""
    key = uuid.uuid4().hex
    path = _outbox() / f"{time.time_ns():020d}-{key[:12]}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"kind": kind, "key": key, "body": body}))
    os.replace(tmp, path)
    return path


def outbox_size() -> int:
    return len(list(_outbox().glob("*.json")))


def outbox_drain(client: Cairn) -> list[dict]:
    """Send what the outbox holds, oldest first, until Cairn stops answering. Returns
    the server's answers to the outcomes sent. A write the server refuses (4xx) is
    dropped with a warning (sending it again would be refused again); one it could
    not take stays. Raises :class:`CairnError` when Cairn is down (the caller trips
    its breaker); another process draining at the same time is left to it."""
    answers: list[dict] = []
    with open(_outbox() / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return answers
        for path in sorted(_outbox().glob("*.json")):
            try:
                item = json.loads(path.read_text())
            except (OSError, ValueError):
                path.unlink(missing_ok=True)
                continue
            try:
                answer = SENDERS[item["kind"]](client, item["body"], item["key"])
            except CairnError as exc:
                if down(exc):
                    raise
                warn(f"{item['kind'].replace('_', ' ')} refused: {exc}")
            else:
                if item["kind"] == "outcome" and isinstance(answer, dict):
                    answers.append(answer)
            path.unlink(missing_ok=True)
    return answers


def flush(state: dict, client: Cairn | None = None) -> list[dict]:
    """Send what is kept (this session's and every other's); never raises for a
    network failure. Returns the server's answers for the outcomes sent."""
    _adopt_legacy(state)
    try:
        client = client or harness_client()
        answers = outbox_drain(client)
    except CairnError as exc:
        left = outbox_size()
        warn(f"{exc.message if exc.code == 'no_token' else exc}; {left} kept and sent later")
        if exc.code != "no_token":
            breaker_trip(state["session_id"])
        return []
    breaker_reset(state["session_id"])
    return answers


def _adopt_legacy(state: dict) -> None:
    """Outcomes an older client kept in the session file move to the shared outbox."""
    for calls in state.get("pending_tool_calls") or []:
        outbox_put("tool_calls", {"calls": calls})
    for body in state.get("pending") or []:
        outbox_put("outcome", body)
    state["pending"], state["pending_tool_calls"] = [], []


def warn(message: str) -> None:
    print(f"cairn: {message}", file=sys.stderr)
