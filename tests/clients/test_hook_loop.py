"""The loop closed through the shipped hook (cairn-hook claude-code as a real process,
fed Claude Code's hook payloads, against a live Cairn): a lesson learned in session 1
is served in session 2, which sends it as in play, so following it and passing
confirms it and failing contradicts it; a blocked tool escalates with the server's
text and is then denied; a test command the model runs is a step, and only the declared
checks the Stop hook runs are checks;
incognito sessions and background-task notifications store nothing."""

from __future__ import annotations

import json
import subprocess

import pytest

from memory.models import (
    ConversationTurn,
    Lesson,
    LessonEvidence,
    LessonState,
    Outcome,
    ToolCall,
)
from tests.clients.conftest import FIXTURES, PYTEST_LABEL, script

pytestmark = pytest.mark.django_db(transaction=True)

PAYLOADS = sorted((FIXTURES / "claude_code").glob("*.json"))


def hook(payload: dict, env, *args) -> dict | None:
    done = subprocess.run(
        [script("cairn-hook"), "claude-code", *args],
        input=json.dumps(payload),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


def event(name: str, session: str, cwd, **fields) -> dict:
    return {
        "session_id": session,
        "transcript_path": f"/home/dev/.claude/projects/shop/{session}.jsonl",
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": name,
        **fields,
    }


def bash(session, cwd, command, *, error=None, tool_id="t", stdout="", background=False):
    """PreToolUse then PostToolUse (or PostToolUseFailure with ``error``) of one Bash call."""
    tool_input = {"command": command, "description": "run"}
    if background:
        tool_input["run_in_background"] = True
    pre = event("PreToolUse", session, cwd, tool_name="Bash", tool_use_id=tool_id)
    pre["tool_input"] = tool_input
    if error is None:
        post = event(
            "PostToolUse",
            session,
            cwd,
            tool_name="Bash",
            tool_use_id=tool_id,
            tool_input=tool_input,
            tool_response={"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False},
        )
    else:
        post = event(
            "PostToolUseFailure",
            session,
            cwd,
            tool_name="Bash",
            tool_use_id=tool_id,
            tool_input=tool_input,
            error=error,
            is_interrupt=False,
        )
    return pre, post


def run_turn(env, session, cwd, prompt, calls, *args):
    hook(event("UserPromptSubmit", session, cwd, prompt=prompt), env)
    answers = []
    for pre, post in calls:
        answers.append((hook(pre, env), hook(post, env)))
    hook(event("Stop", session, cwd, stop_hook_active=False), env, *args)
    return answers


def learn_the_lesson(env, repo) -> Lesson:
    for path in PAYLOADS:
        hook(json.loads(path.read_text().replace("{cwd}", str(repo))), env)
    lesson = Lesson.objects.get(operation_key="bash:uv:pip-install")
    assert lesson.state == LessonState.ACTIVE
    return lesson


def test_a_served_lesson_followed_and_passed_is_confirmed(harness_env, repo):
    lesson = learn_the_lesson(harness_env, repo)
    before = lesson.confidence

    started = hook(event("SessionStart", "cc-session-2", repo, source="startup"), harness_env)
    assert "`uv pip-install`" in started["hookSpecificOutput"]["additionalContext"]
    run_turn(
        harness_env,
        "cc-session-2",
        repo,
        "Set the project up again and run the tests.",
        [
            bash("cc-session-2", repo, "uv pip install -r requirements.txt", tool_id="a"),
            bash("cc-session-2", repo, "pytest -q", tool_id="b", stdout="12 passed"),
        ],
    )
    outcome = Outcome.objects.get(session_id="cc-session-2")
    assert {"type": "lesson", "id": lesson.pk} in outcome.in_play
    assert outcome.passed is True
    assert {"type": "lesson", "id": lesson.pk} in outcome.response["confirmed"]
    lesson.refresh_from_db()
    assert lesson.confidence > before
    assert LessonEvidence.objects.filter(
        lesson=lesson, outcome=outcome, relation=LessonEvidence.Relation.SUPPORTS
    ).exists()


def test_a_served_lesson_followed_and_failed_is_contradicted(harness_env, repo):
    lesson = learn_the_lesson(harness_env, repo)
    before = lesson.confidence
    (repo / "test_broken.py").write_text("def test_broken():\n    assert False\n")
    hook(event("SessionStart", "cc-session-4", repo, source="startup"), harness_env)
    run_turn(
        harness_env,
        "cc-session-4",
        repo,
        "Set the project up again and run the tests.",
        [
            bash(
                "cc-session-4",
                repo,
                "uv pip install -r requirements.txt",
                tool_id="a",
                error="Exit code 1\nerror: No solution found when resolving dependencies",
            ),
            bash("cc-session-4", repo, "pytest -q", tool_id="b", error="Exit code 1\n2 failed"),
        ],
    )
    outcome = Outcome.objects.get(session_id="cc-session-4")
    assert outcome.passed is False
    assert {"type": "lesson", "id": lesson.pk} in outcome.response["contradicted"]
    lesson.refresh_from_db()
    assert lesson.confidence < before
    assert LessonEvidence.objects.filter(
        lesson=lesson, outcome=outcome, relation=LessonEvidence.Relation.CONTRADICTS
    ).exists()


def test_a_blocked_tool_escalates_with_the_servers_text_and_is_then_denied(harness_env, repo):
    session = "cc-session-3"
    hook(event("SessionStart", session, repo, source="startup"), harness_env)
    hook(
        event("UserPromptSubmit", session, repo, prompt="List the open pull requests."), harness_env
    )
    said = None
    for attempt in range(8):
        pre, post = bash(
            session,
            repo,
            "gh pr list",
            tool_id=f"gh{attempt}",
            error="Exit code 4\nTo get started with GitHub CLI, please run:  gh auth login",
        )
        assert hook(pre, harness_env) is None
        said = hook(post, harness_env)
        if said:
            break
    assert said is not None, "the server never escalated"
    text = said["hookSpecificOutput"]["additionalContext"]
    assert said["hookSpecificOutput"]["hookEventName"] == "PostToolUseFailure"
    assert text.startswith("Blocked: gh")
    # The server's own answer for this turn says the same.
    from cairn_client import Cairn

    state = json.loads((repo.parent / "state" / f"{session}.json").read_text())
    again = Cairn(
        url=harness_env["CAIRN_URL"], token=harness_env["CAIRN_HARNESS_TOKEN"]
    ).post_result(
        state["outcome_id"], tool="gh", ok=False, exit_code=4, stderr="please run: gh auth login"
    )
    assert again["action"] == "escalate" and again["escalation"]["text"] == text
    pre, _ = bash(session, repo, "gh pr view 12", tool_id="gh-next")
    denied = hook(pre, harness_env)["hookSpecificOutput"]
    assert denied == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": text,
    }
    pre, _ = bash(session, repo, "git status", tool_id="git")
    assert hook(pre, harness_env) is None  # other tools run on
    # The person answers: the blockers of that turn close, the next turn is not blocked.
    from memory.models import TurnRecovery

    assert TurnRecovery.objects.get(turn_id=state["outcome_id"]).blockers
    hook(event("UserPromptSubmit", session, repo, prompt="I logged in, go on."), harness_env)
    assert TurnRecovery.objects.get(turn_id=state["outcome_id"]).blockers == {}
    pre, _ = bash(session, repo, "gh pr list", tool_id="gh-after")
    assert hook(pre, harness_env) is None


@pytest.mark.parametrize(
    ("command", "background", "error"),
    [
        ("pytest -q | tail -3", False, None),
        ("pytest -q || true", False, None),
        ("pytest -q; echo done", False, None),
        ("exit 0 && pytest -q", False, None),
        ("pytest -p no:z#z || true", False, None),
        ("pytest -q", True, None),
        ("pytest -q", False, None),
        ("python -m pytest -q --co", False, None),
    ],
)
def test_a_test_command_the_model_runs_is_a_step_never_a_check(
    harness_env, repo, command, background, error
):
    """Whatever its form, the model's test run is not evidence: with a failing suite
    and the model's "12 passed", the only check is the declared one, and it failed."""
    (repo / "test_broken.py").write_text("def test_broken():\n    assert False\n")
    run_turn(
        harness_env,
        "cc-unverified",
        repo,
        "Run the tests.",
        [bash("cc-unverified", repo, command, stdout="12 passed", background=background)],
    )
    outcome = Outcome.objects.get()
    assert [(c["label"], c["exit_code"]) for c in outcome.checks] == [(PYTEST_LABEL, 1)]
    assert outcome.passed is False
    [step] = outcome.approach
    # A step named for its program (behaviour flags like --co stay in the key), or bash.
    assert step["operation_key"].split(" ")[0] in ("bash", "bash:pytest")


def test_model_run_checks_are_steps_with_their_real_status(harness_env, repo):
    run_turn(
        harness_env,
        "cc-exit",
        repo,
        "Run the tests.",
        [
            bash("cc-exit", repo, "cd sub && pytest -q", tool_id="a", stdout="ok"),
            bash("cc-exit", repo, "ruff check .", tool_id="b", error="Exit code 2\nE501"),
            bash("cc-exit", repo, "cd sub && pytest -q", tool_id="c", error="Exit code 5"),
        ],
    )
    outcome = Outcome.objects.get()
    assert [(s["operation_key"], s["outcome"]) for s in outcome.approach] == [
        ("bash:pytest", "ok"),
        ("bash:ruff:check", "failed"),  # ruff's verb is part of its operation (opkeys)
        ("bash", "failed"),  # a failed chain: any of its commands may have failed
    ]
    assert [c["label"] for c in outcome.checks] == [PYTEST_LABEL]
    assert outcome.passed is True  # the declared suite passed


def test_declared_checks_run_by_the_hook_are_the_evidence(harness_env, repo):
    (repo / "ok.sh").write_text("exit 0\n")
    (repo / "bad.sh").write_text("exit 3\n")
    env = {k: v for k, v in harness_env.items() if k != "CAIRN_HOOK_CHECKS"}
    run_turn(
        env,
        "cc-declared",
        repo,
        "Fix it.",
        [bash("cc-declared", repo, "pytest -q | tail -3", stdout="12 passed")],
        "--check",
        "test=sh ok.sh",
        "--check",
        "lint=sh bad.sh",
        "--check-timeout",
        "30",
    )
    outcome = Outcome.objects.get()
    # A test check that shows no test report ran no known test: kept, not run.
    assert [(c["kind"], c["label"], c["exit_code"], c["ran"]) for c in outcome.checks] == [
        ("test", "declared:sh", 0, False),
        ("lint", "declared:sh", 3, True),
    ]
    assert outcome.passed is False


def test_an_incognito_session_sends_nothing(harness_env, repo):
    env = {**harness_env, "CAIRN_INCOGNITO": "1"}
    hook(event("SessionStart", "cc-incognito", repo, source="startup"), env)
    run_turn(
        env,
        "cc-incognito",
        repo,
        "Something private.",
        [bash("cc-incognito", repo, "pytest -q", stdout="1 passed")],
    )
    assert not Outcome.objects.exists()
    assert not ConversationTurn.objects.exists()
    assert not ToolCall.objects.exists()


def test_a_background_task_notification_is_not_the_users_words(harness_env, repo):
    session = "cc-notify"
    hook(event("UserPromptSubmit", session, repo, prompt="Run the slow suite."), harness_env)
    hook(
        event(
            "UserPromptSubmit",
            session,
            repo,
            prompt="<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n"
            "</task-notification>",
        ),
        harness_env,
    )
    hook(event("Stop", session, repo, stop_hook_active=False), harness_env)
    assert list(ConversationTurn.objects.values_list("content", flat=True)) == [
        "Run the slow suite."
    ]
    assert Outcome.objects.count() == 1


def test_deliberate_failures_are_logged_but_never_known_errors(harness_env, repo):
    from memory.models import Category, Knowledge

    run_turn(
        harness_env,
        "cc-errors",
        repo,
        "Write the failing test first, then fix it.",
        [
            bash(
                "cc-errors", repo, "pytest -q tests/test_cart.py", tool_id="a", error="Exit code 1"
            ),
            bash("cc-errors", repo, "grep -rn TODO src", tool_id="b", error="Exit code 1"),
            bash(
                "cc-errors",
                repo,
                "pip install -r requirements.txt",
                tool_id="c",
                error="Exit code 1\nerror: externally-managed-environment",
            ),
        ],
    )
    assert [(c.operation_key, c.ok) for c in ToolCall.objects.order_by("at", "id")] == [
        ("bash:pytest", False),
        ("bash:grep -rn", False),  # flags that change behaviour are part of it (opkeys)
        ("bash:pip:install", False),
    ]
    errors = Knowledge.objects.filter(category=Category.ERROR)
    assert list(errors.values_list("operation_key", flat=True)) == ["bash:pip:install"]
