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
from tests.clients.conftest import script

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
    assert command.endswith("cairn-hook claude-code")
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
    assert install(machine, repo).returncode == 0
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
    assert ToolCall.objects.filter(channel=Channel.HARNESS).count() == 5
    assert os.environ.get("CAIRN_HARNESS_TOKEN") != tokens["harness"]  # not leaked here
