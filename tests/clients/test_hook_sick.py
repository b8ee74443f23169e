"""A sick Cairn costs Claude Code nothing: against a server that accepts connections
and never answers, and one that refuses them, every hook of a session answers within
2 s (the hooks' default budget, not the tests' longer one), and what was kept (the
prompt and the outcome) is sent by a hook of another session once Cairn answers."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from memory.models import ConversationTurn, Outcome
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
def test_every_hook_answers_within_2s_and_another_session_sends_what_was_kept(
    harness_env, repo, request, sick
):
    env = {**harness_env, "CAIRN_URL": request.getfixturevalue(sick)}
    del env["CAIRN_HOOK_BUDGET_S"]  # the shipped default
    took = a_session(env, "cc-sick", repo)
    assert max(took) < 2.0, took
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


def test_after_a_failure_the_sessions_next_hooks_skip_the_network(harness_env, repo, hung_url):
    env = {**harness_env, "CAIRN_URL": hung_url}
    del env["CAIRN_HOOK_BUDGET_S"]
    took = a_session(env, "cc-breaker", repo)
    # The first hook waited its budget; with the breaker open the rest did not wait.
    assert took[0] > 1.0
    assert max(took[1:]) < 1.0, took


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
