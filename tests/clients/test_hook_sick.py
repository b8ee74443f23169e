"""A sick Cairn costs Claude Code nothing and loses nothing: against a server that
accepts connections and never answers, one that refuses them, and one that hangs and
is killed mid-session, every hook exits 0, a slow answer is reported as slow, and
what was kept (prompts, tool calls, outcomes) is sent once by a later hook of any
session when Cairn answers again."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from memory.models import ConversationTurn, Outcome
from tests.clients.conftest import script
from tests.clients.test_hook_loop import bash, event, hook

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hung_url():
    """A server that accepts every connection and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held, stop = [], threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


@pytest.fixture
def refusing_url():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now: connections are refused
    return f"http://127.0.0.1:{port}"


def a_session(env, session, cwd) -> list[float]:
    """One whole Claude Code session through the hook; the seconds each hook took."""
    hooks = [
        event("SessionStart", session, cwd, source="startup"),
        event("UserPromptSubmit", session, cwd, prompt=f"Fix the cart ({session})."),
        *bash(session, cwd, "pip install -r requirements.txt", tool_id="a", error="Exit code 1"),
        *bash(session, cwd, "uv pip install -r requirements.txt", tool_id="b"),
        *bash(session, cwd, "pytest -q", tool_id="c", stdout="12 passed"),
        event("Stop", session, cwd, stop_hook_active=False),
    ]
    took = []
    for payload in hooks:
        started = time.monotonic()
        hook(payload, env)
        took.append(time.monotonic() - started)
    return took


@pytest.mark.parametrize("sick", ["hung_url", "refusing_url"])
def test_a_sick_cairn_never_blocks_and_another_session_sends_what_was_kept(
    harness_env, repo, request, sick
):
    env = {**harness_env, "CAIRN_URL": request.getfixturevalue(sick)}
    del env["CAIRN_HOOK_BUDGET_S"]  # the shipped default
    a_session(env, "cc-sick", repo)  # every hook exited 0 (hook() asserts it)
    assert not Outcome.objects.exists() and not ConversationTurn.objects.exists()

    # Cairn is back: the first hook of a new session sends the other session's prompt
    # and outcome, in order, once.
    hook(event("SessionStart", "cc-later", repo, source="startup"), harness_env)
    outcome = Outcome.objects.get()
    assert (outcome.session_id, outcome.passed, outcome.channel) == ("cc-sick", True, "harness")
    turn = ConversationTurn.objects.get()
    assert (turn.session_id, turn.content) == ("cc-sick", "Fix the cart (cc-sick).")
    hook(event("SessionStart", "cc-later-2", repo, source="startup"), harness_env)
    assert Outcome.objects.count() == 1 and ConversationTurn.objects.count() == 1


def test_after_no_answer_the_sessions_next_hooks_skip_the_network(harness_env, repo, hung_url):
    env = {**harness_env, "CAIRN_URL": hung_url, "CAIRN_HOOK_LIMIT_S": "1"}
    del env["CAIRN_HOOK_BUDGET_S"]
    first = hook_raw(event("SessionStart", "cc-breaker", repo, source="startup"), env)
    assert "no answer in" in first.stderr and "slow or hung" in first.stderr
    rest = hook_raw(event("UserPromptSubmit", "cc-breaker", repo, prompt="go"), env)
    assert rest.stderr == ""  # the breaker is open: no second wait, nothing to say


def test_a_slow_answer_is_reported_as_slow_not_unreachable(harness_env, repo):
    """An answer past the budget but before the limit is used and said to be slow."""
    with SlowServer(delay=1.5) as url:
        env = {**harness_env, "CAIRN_URL": url, "CAIRN_HOOK_BUDGET_S": "1"}
        env["CAIRN_HOOK_LIMIT_S"] = "60"
        done = hook_raw(event("SessionStart", "cc-slow", repo, source="startup"), env)
    assert done.returncode == 0
    assert "Cairn is slow" in done.stderr and "over the 1 s budget" in done.stderr
    assert "Cannot reach" not in done.stderr and "hung" not in done.stderr


def test_cairn_hung_then_killed_mid_session_loses_no_row(harness_env, repo, live_server):
    """Cairn answers, then hangs, then refuses connections, then is back: every prompt,
    tool call and outcome of the session reaches it once, sent by a later hook."""
    from memory.models import ToolCall
    from tests.e2e.model_server import Switch

    switch = Switch(live_server.url)
    switch.thread.start()
    env = {**harness_env, "CAIRN_URL": switch.url, "CAIRN_HOOK_LIMIT_S": "2"}
    env["CAIRN_HOOK_BUDGET_S"] = "1"
    env["CAIRN_BREAKER_S"] = "0"  # try the network at every hook: the worst case
    s = "cc-flaky"
    try:
        hook(event("SessionStart", s, repo, source="startup"), env)
        hook(event("UserPromptSubmit", s, repo, prompt="Turn one."), env)
        for p in bash(s, repo, "ls", tool_id="a"):
            hook(p, env)
        switch.hung = True  # hung mid-turn
        for p in bash(s, repo, "pip install -r requirements.txt", tool_id="b", error="Exit code 1"):
            hook(p, env)
        hook(event("Stop", s, repo, stop_hook_active=False), env)
        hook(event("UserPromptSubmit", s, repo, prompt="Turn two."), env)
        switch.hung, switch.on = False, False  # killed
        for p in bash(s, repo, "uv pip install -r requirements.txt", tool_id="c"):
            hook(p, env)
        hook(event("Stop", s, repo, stop_hook_active=False), env)
        switch.on = True  # back: any later hook of any session sends what was kept
        outbox = Path(env["CAIRN_STATE_DIR"]) / "outbox"
        for later in range(6):  # each within its own time limit: as many as it takes
            hook(event("SessionStart", f"cc-after-{later}", repo, source="startup"), env)
            if not list(outbox.glob("*.json")):
                break
        assert not list(outbox.glob("*.json"))
    finally:
        switch.sock.close()
        for conn in switch.held:
            conn.close()
    assert sorted(ConversationTurn.objects.values_list("content", flat=True)) == [
        "Turn one.",
        "Turn two.",
    ]
    assert Outcome.objects.filter(session_id=s).count() == 2
    assert sorted(ToolCall.objects.values_list("operation_key", flat=True)) == [
        "bash:ls",
        "bash:pip:install",
        "bash:uv:pip-install",
    ]
    # Sent once: another hook sends nothing twice.
    hook(event("SessionStart", "cc-after-again", repo, source="startup"), env)
    assert Outcome.objects.count() == 2 and ToolCall.objects.count() == 3


def test_a_tool_call_of_another_session_sends_what_was_kept(harness_env, repo, refusing_url):
    env = {**harness_env, "CAIRN_URL": refusing_url}
    a_session(env, "cc-kept", repo)
    assert not Outcome.objects.exists()
    pre, post = bash("cc-busy", repo, "ls", tool_id="x")
    hook(pre, harness_env)
    assert not Outcome.objects.exists()  # PreToolUse stays off the network
    hook(post, harness_env)
    assert Outcome.objects.get().session_id == "cc-kept"
    assert ConversationTurn.objects.get().session_id == "cc-kept"


def hook_raw(payload, env):
    return subprocess.run(
        [script("cairn-hook"), "claude-code"],
        input=json.dumps(payload),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


class SlowServer:
    """Answers every request with ``{}`` after ``delay`` seconds."""

    def __init__(self, delay: float):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Slow(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib's name
                time.sleep(delay)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_POST = do_GET

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
