"""cairn-check and cairn-turn as real processes against a live Cairn: the wrapped
command's output and exit code pass through unchanged, the turn's checks and steps
become a harness-reported outcome, and an unreachable server loses nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from memory.models import Lesson, LessonState, Outcome
from tests.clients.conftest import script

pytestmark = pytest.mark.django_db(transaction=True)


def run(name, *args, env, cwd=None):
    return subprocess.run(
        [script(name), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_cairn_check_streams_output_and_keeps_the_exit_code(harness_env, tmp_path):
    ok = run(
        "cairn-check",
        "--label",
        "tests",
        "--",
        sys.executable,
        "-c",
        "print('all good')",
        env=harness_env,
    )
    assert (ok.returncode, ok.stdout) == (0, "all good\n")
    failed = run(
        "cairn-check",
        "--kind",
        "lint",
        "--",
        sys.executable,
        "-c",
        "import sys; print('E1'); sys.exit(3)",
        env=harness_env,
    )
    assert (failed.returncode, failed.stdout) == (3, "E1\n")
    state = json.loads(run("cairn-turn", "status", env=harness_env).stdout)
    assert [(c["kind"], c["label"], c["exit_code"], c["step"]) for c in state["checks"]] == [
        ("test", "tests", 0, 1),
        ("lint", os.path.basename(sys.executable), 3, 2),
    ]
    assert state["checks"][0]["duration_s"] >= 0


def test_a_turn_becomes_a_harness_outcome_and_teaches_a_lesson(harness_env, repo):
    env = harness_env
    assert (
        run("cairn-turn", "start", "--goal", "install the deps", env=env, cwd=repo).returncode == 0
    )
    run(
        "cairn-turn",
        "step",
        "pip:install",
        "--target",
        "requirements.txt",
        "--failed",
        env=env,
        cwd=repo,
    )
    run("cairn-turn", "step", "uv:pip-install", "--target", "requirements.txt", env=env, cwd=repo)
    assert (
        run(
            "cairn-check",
            "--label",
            "pytest",
            "--",
            sys.executable,
            "-c",
            "pass",
            env=env,
            cwd=repo,
        ).returncode
        == 0
    )
    ended = run("cairn-turn", "end", env=env, cwd=repo)
    assert ended.returncode == 0, ended.stderr
    assert "passed=true" in ended.stdout and "lessons_created" in ended.stdout
    outcome = Outcome.objects.get()
    assert (outcome.channel, outcome.passed, outcome.session_id) == ("harness", True, "sess-cli")
    assert outcome.checks[0]["exit_code"] == 0 and outcome.checks[0]["label"] == "pytest"
    lesson = Lesson.objects.get(operation_key="uv:pip-install")
    assert lesson.state == LessonState.ACTIVE


def test_an_unreachable_server_keeps_the_turn_and_sends_it_later(harness_env, repo):
    down = {**harness_env, "CAIRN_URL": "http://127.0.0.1:9"}
    run("cairn-turn", "start", env=down, cwd=repo)
    checked = run(
        "cairn-check", "--", sys.executable, "-c", "raise SystemExit(1)", env=down, cwd=repo
    )
    assert checked.returncode == 1  # the server being down never changes it
    ended = run("cairn-turn", "end", env=down, cwd=repo)
    assert ended.returncode == 0
    assert "kept and sent later" in ended.stderr
    assert not Outcome.objects.exists()
    sent = run("cairn-turn", "flush", env=harness_env, cwd=repo)
    assert sent.returncode == 0, sent.stderr
    assert Outcome.objects.get().passed is False
    assert json.loads(run("cairn-turn", "status", env=harness_env).stdout)["pending"] == []


def test_a_shared_goal_is_kept_where_the_workspace_opted_in(harness_env, repo):
    from memory.models import ProjectLabel, Workspace

    Workspace.objects.update(settings={"store_goal_text": True})
    env = harness_env
    run("cairn-turn", "start", "--goal", "fix the cart", "--share-goal", env=env, cwd=repo)
    assert run("cairn-turn", "end", env=env, cwd=repo).returncode == 0
    run("cairn-turn", "start", "--goal", "keep this one private", env=env, cwd=repo)
    assert run("cairn-turn", "end", env=env, cwd=repo).returncode == 0
    assert sorted(Outcome.objects.values_list("goal_text", flat=True)) == ["", "fix the cart"]
    assert ProjectLabel.objects.get().label == "shop"  # named after the remote it sent


def test_cairn_check_answers_its_own_help_and_version_and_records_nothing(harness_env):
    for flag in ("--help", "--version"):
        answer = run("cairn-check", flag, env=harness_env)
        assert answer.returncode == 0, answer.stderr
        assert "cairn-check" in answer.stdout
        assert "``" not in answer.stdout  # plain words, not the docstring's reST
    state = json.loads(run("cairn-turn", "status", env=harness_env).stdout)
    assert state["checks"] == [] and state["approach"] == []


def test_a_missing_token_names_the_harness_variable(harness_env, repo):
    env = {k: v for k, v in harness_env.items() if k not in ("CAIRN_TOKEN", "CAIRN_HARNESS_TOKEN")}
    run("cairn-turn", "start", env=env, cwd=repo)
    ended = run("cairn-turn", "end", env=env, cwd=repo)
    assert "CAIRN_HARNESS_TOKEN" in ended.stderr and "kept and sent later" in ended.stderr
    assert "token=" not in ended.stderr  # a shell user cannot pass a keyword argument


def test_an_agent_token_outcome_prints_the_servers_hint(harness_env, repo):
    env = {**harness_env, "CAIRN_HARNESS_TOKEN": harness_env["CAIRN_TOKEN"]}
    run("cairn-turn", "start", env=env, cwd=repo)
    run("cairn-check", "--", sys.executable, "-c", "pass", env=env, cwd=repo)
    ended = run("cairn-turn", "end", env=env, cwd=repo)
    assert ended.returncode == 0, ended.stderr
    hint = Outcome.objects.get().response["hint"]
    assert f"hint: {hint}" in ended.stdout and "harness token" in hint


def test_cairn_turn_sends_what_context_and_check_served_as_in_play(harness_env, repo):
    test_a_turn_becomes_a_harness_outcome_and_teaches_a_lesson(harness_env, repo)
    lesson = Lesson.objects.get(operation_key="uv:pip-install")
    env = {**harness_env, "CAIRN_SESSION": "sess-cli-2"}
    shown = run("cairn-turn", "check", "uv:pip-install", env=env, cwd=repo)
    assert shown.returncode == 0 and "`uv pip-install`" in shown.stdout
    run("cairn-turn", "start", env=env, cwd=repo)
    run("cairn-turn", "step", "uv:pip-install", "--target", "requirements.txt", env=env, cwd=repo)
    run("cairn-check", "--", sys.executable, "-c", "pass", env=env, cwd=repo)
    ended = run("cairn-turn", "end", env=env, cwd=repo)
    assert f'confirmed=[{{"type": "lesson", "id": {lesson.pk}}}]' in ended.stdout, ended.stdout
    outcome = Outcome.objects.get(session_id="sess-cli-2")
    assert outcome.in_play == [{"type": "lesson", "id": lesson.pk}]


def test_an_incognito_session_from_the_cli_sends_nothing(harness_env, repo):
    run("cairn-turn", "--incognito", "start", env=harness_env, cwd=repo)
    run("cairn-check", "--", sys.executable, "-c", "pass", env=harness_env, cwd=repo)
    ended = run("cairn-turn", "end", env=harness_env, cwd=repo)
    assert "incognito: nothing sent" in ended.stdout
    run("cairn-turn", "start", env=harness_env, cwd=repo)  # still incognito: the session is
    run("cairn-turn", "end", env=harness_env, cwd=repo)
    assert not Outcome.objects.exists()


def test_a_step_given_as_a_command_is_named_as_the_hook_names_it(harness_env, repo):
    """``cairn-turn step --command`` and cairn-hook share one extraction
    (cairn_client.opkeys): the lesson it teaches is the hook's lesson."""
    env = harness_env
    run("cairn-turn", "start", "--goal", "install the deps", env=env, cwd=repo)
    pip = "pip install -r requirements.txt"
    run("cairn-turn", "step", "--command", pip, "--failed", env=env, cwd=repo)
    run("cairn-turn", "step", "--command", "uv pip install -r requirements.txt", env=env, cwd=repo)
    both = run("cairn-turn", "step", "pip:install", "--command", pip, env=env, cwd=repo)
    assert both.returncode == 2 and "not both" in both.stderr
    run("cairn-check", "--label", "pytest", "--", sys.executable, "-c", "pass", env=env, cwd=repo)
    assert run("cairn-turn", "end", env=env, cwd=repo).returncode == 0
    outcome = Outcome.objects.get()
    assert [(s["operation_key"], s["target"]) for s in outcome.approach] == [
        ("bash:pip:install", "requirements.txt"),
        ("bash:uv:pip-install", "requirements.txt"),
    ]
    lesson = Lesson.objects.get(operation_key="bash:uv:pip-install")
    assert lesson.text == "Use `uv pip-install` instead of `pip install` for requirements.txt."
