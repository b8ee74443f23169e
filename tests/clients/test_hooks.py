"""cairn-hook claude-code fed Claude Code's hook payloads (fixtures written from the
documented shapes) as a real process against a live Cairn: a session in which pip
fails and uv works becomes a harness outcome and an active lesson, which the next
SessionStart prints into the session's context."""

from __future__ import annotations

import json
import subprocess

import pytest

from memory.models import ConversationTurn, Lesson, LessonState, Outcome, ToolCall
from tests.clients.conftest import FIXTURES, PYTEST_LABEL, script

pytestmark = pytest.mark.django_db(transaction=True)

PAYLOADS = sorted((FIXTURES / "claude_code").glob("*.json"))


def hook(payload: dict, env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [script("cairn-hook"), "claude-code"],
        input=json.dumps(payload),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def payload(path, cwd) -> dict:
    return json.loads(path.read_text().replace("{cwd}", str(cwd)))


def test_a_recorded_session_becomes_an_outcome_and_a_lesson(harness_env, repo):
    answers = [hook(payload(path, repo), harness_env) for path in PAYLOADS]
    assert all(a.returncode == 0 for a in answers), [a.stderr for a in answers]
    first = json.loads(answers[0].stdout)["hookSpecificOutput"]["additionalContext"]
    assert "instead of" not in first  # nothing learned yet
    outcome = Outcome.objects.get()
    assert (outcome.channel, outcome.passed, outcome.session_id) == (
        "harness",
        True,
        "cc-session-1",
    )
    assert [(s["operation_key"], s["outcome"]) for s in outcome.approach] == [
        ("bash:pip:install", "failed"),
        ("bash:uv:pip-install", "ok"),
        ("edit", "ok"),
        ("bash:pytest", "ok"),
    ]
    assert outcome.approach[2]["mutated"] and outcome.approach[2]["target"] == "cart.py"
    # The model's pytest is a step; the check is the declared one the Stop hook ran.
    [check] = outcome.checks
    assert (check["kind"], check["label"], check["exit_code"], check["ran"]) == (
        "test",
        PYTEST_LABEL,
        0,
        True,
    )
    turn = ConversationTurn.objects.get()
    assert (turn.role, turn.channel) == ("user", "harness")
    assert turn.content.startswith("Install the dependencies")
    calls = ToolCall.objects.order_by("at", "id")
    assert [(c.operation_key, c.ok) for c in calls] == [
        ("bash:pip:install", False),
        ("bash:uv:pip-install", True),
        ("edit", True),
        ("bash:pytest", True),
    ]
    lesson = Lesson.objects.get(operation_key="bash:uv:pip-install")
    assert lesson.state == LessonState.ACTIVE

    nxt = payload(PAYLOADS[0], repo) | {"session_id": "cc-session-2"}
    started = hook(nxt, harness_env)
    context = json.loads(started.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart"
    assert (
        "Use `uv pip-install` instead of `pip install` for requirements.txt."
        in context["additionalContext"]
    )


def test_a_failed_check_fails_the_turn(harness_env, repo):
    (repo / "test_broken.py").write_text("def test_broken():\n    assert False\n")
    for path in PAYLOADS[1:9]:
        hook(payload(path, repo), harness_env)
    failed = payload(PAYLOADS[9], repo)
    failed["hook_event_name"] = "PostToolUseFailure"
    failed["error"] = "Exit code 1\n3 failed, 9 passed"
    failed.pop("tool_response")
    hook(failed, harness_env)
    hook(payload(PAYLOADS[10], repo), harness_env)
    outcome = Outcome.objects.get()
    assert outcome.passed is False
    assert outcome.checks[0]["exit_code"] == 1
    assert not Lesson.objects.exists()


def test_an_unreachable_server_never_blocks_claude_code(harness_env, repo):
    down = {**harness_env, "CAIRN_URL": "http://127.0.0.1:9"}
    answers = [hook(payload(path, repo), down) for path in PAYLOADS]
    assert all(a.returncode == 0 for a in answers)
    assert any("cairn:" in a.stderr for a in answers)
    assert not Outcome.objects.exists()
    # The session's breaker is open now; a hook of another session sends what was kept.
    hook(payload(PAYLOADS[10], repo) | {"session_id": "cc-other"}, harness_env)
    assert Outcome.objects.get().passed is True
