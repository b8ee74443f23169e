"""``cairn-hook install claude-code`` as a process: the harness token goes to a 0600
file outside the project and never into the project's settings; the hooks, the Bash
sandbox and the permission rules are merged into what is there; and the hook then
reads the token from that file. The payloads are the ones Claude Code 2.1.328 really
sent (recorded by ``make e2e`` in tests/e2e/fixtures/)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from memory.models import Channel, Outcome, ToolCall
from tests.clients.conftest import PYTEST_CHECK, PYTEST_LABEL, script

pytestmark = pytest.mark.django_db(transaction=True)

RECORDED = Path(__file__).parents[1] / "e2e" / "fixtures" / "claude_code_2.1.328.jsonl"


def install(env, project, *args):
    return subprocess.run(
        [script("cairn-hook"), "install", "claude-code", "--project", str(project), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def machine(harness_env, tmp_path):
    """The harness environment with its own HOME and no state-dir override."""
    env = dict(harness_env, HOME=str(tmp_path / "home"))
    env.pop("CAIRN_STATE_DIR")
    env.pop("XDG_CONFIG_HOME", None)
    env.pop("XDG_STATE_HOME", None)
    return env


def test_install_keeps_the_token_out_of_the_project(machine, repo, tokens):
    settings_path = repo / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    settings_path.write_text(
        json.dumps(
            {
                "env": {"CAIRN_HARNESS_TOKEN": tokens["harness"], "FOO": "1"},
                "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]},
                "permissions": {"allow": ["Bash(make:*)"]},
            }
        )
    )
    answer = install(machine, repo)
    assert answer.returncode == 0, answer.stderr
    assert "removed CAIRN_HARNESS_TOKEN" in answer.stderr
    again = install(machine, repo)  # idempotent: nothing doubled
    assert again.returncode == 0, again.stderr

    text = settings_path.read_text()
    assert tokens["harness"] not in text
    settings = json.loads(text)
    assert settings["env"] == {"FOO": "1"}
    token_file = Path(machine["HOME"]) / ".config" / "cairn" / "harness-token"
    assert token_file.read_text().strip() == tokens["harness"]
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert token_file.parent.stat().st_mode & 0o777 == 0o700

    stop = settings["hooks"]["Stop"]
    assert stop[0]["hooks"][0]["command"] == "say done"  # theirs, kept
    assert len(stop) == 2
    command = stop[1]["hooks"][0]["command"]
    assert f"CAIRN_HARNESS_TOKEN_FILE={token_file}" in command
    # The checks detected in the project (its pytest) ride on the one Stop hook.
    assert "cairn-hook claude-code --check 'test=python -m pytest -q'" in command
    assert set(settings["hooks"]) == {
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "Stop",
    }
    sandbox = settings["sandbox"]
    assert sandbox["enabled"] and sandbox["failIfUnavailable"]
    assert sandbox["allowUnsandboxedCommands"] is False
    state_dir = Path(machine["HOME"]) / ".local" / "state" / "cairn"
    assert sandbox["filesystem"]["denyRead"] == [str(token_file.parent), str(state_dir)]
    assert sandbox["network"]["allowedDomains"] == []
    deny = settings["permissions"]["deny"]
    assert f"Read(/{token_file.parent}/**)" in deny and f"Read(/{state_dir}/**)" in deny
    assert "Edit(./.claude/**)" in deny and "Write(./.claude/**)" in deny
    assert settings["permissions"]["allow"] == ["Bash(make:*)", "mcp__cairn"]


def test_install_without_a_token_says_so(machine, repo):
    env = dict(machine)
    env.pop("CAIRN_HARNESS_TOKEN")
    answer = install(env, repo)
    assert answer.returncode != 0
    assert "no harness token" in answer.stderr
    assert not (repo / ".claude").exists()


def test_the_recorded_session_through_the_installed_hook(machine, repo, tokens):
    """Claude Code's real payloads, replayed through the command the install wrote:
    the token comes from the file (the environment has none)."""
    assert install(machine, repo, "--check", PYTEST_CHECK).returncode == 0
    command = json.loads((repo / ".claude" / "settings.json").read_text())["hooks"]["Stop"][0][
        "hooks"
    ][0]["command"]
    env = {k: v for k, v in machine.items() if not k.startswith("CAIRN_")}
    for line in RECORDED.read_text().splitlines():
        payload = line.replace("{cwd}", str(repo)).replace("{home}", machine["HOME"])
        done = subprocess.run(
            command, shell=True, input=payload, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert "hook skipped" not in done.stderr, done.stderr
    outcome = Outcome.objects.get()
    assert (outcome.channel, outcome.passed) == (Channel.HARNESS, True)
    assert [(s["operation_key"], s["outcome"]) for s in outcome.approach] == [
        ("bash:pip:install", "failed"),
        ("read", "ok"),
        ("edit", "ok"),
        ("bash:pip:install", "ok"),
        ("bash:pytest", "ok"),
    ]
    assert [(c["label"], c["exit_code"], c["ran"]) for c in outcome.checks] == [
        (PYTEST_LABEL, 0, True)
    ]
    assert ToolCall.objects.filter(channel=Channel.HARNESS).count() == 5
    assert os.environ.get("CAIRN_HARNESS_TOKEN") != tokens["harness"]  # not leaked here


def test_install_refuses_a_client_inside_the_project_and_the_hook_refuses_to_run(
    machine, tmp_path, tokens
):
    """The client installed in the project's own virtualenv (the model may write there):
    install refuses, and the hook, run anyway, refuses before it reads the token."""
    import sys

    project = Path(sys.prefix).resolve().parent  # this checkout: its .venv holds the client
    answer = install(machine, project)
    assert answer.returncode != 0
    assert "refusing to run with the harness token" in answer.stderr
    assert "which the model may write" in answer.stderr
    payload = {"hook_event_name": "SessionStart", "session_id": "s", "cwd": str(project)}
    done = subprocess.run(
        [script("cairn-hook"), "claude-code"],
        input=json.dumps(payload),
        env=machine,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1  # Claude Code: a non-blocking error, shown to the person
    assert "refusing to run with the harness token" in done.stderr
    assert done.stdout == ""
    assert not Outcome.objects.exists()


def test_install_denies_edit_and_write_on_the_clients_code_and_private_folders(machine, repo):
    import cairn_client

    assert install(machine, repo, "--no-checks").returncode == 0
    settings = json.loads((repo / ".claude" / "settings.json").read_text())
    deny = settings["permissions"]["deny"]
    package = Path(cairn_client.__file__).resolve().parent
    import sys

    for path in [Path(sys.prefix).resolve(), Path(machine["HOME"]) / ".config" / "cairn"]:
        assert f"Edit(/{path}/**)" in deny and f"Write(/{path}/**)" in deny, deny
    assert any(
        package == Path(rule[6:-4]) or Path(rule[6:-4]) in package.parents
        for rule in deny
        if rule.startswith("Edit(/")
    )
