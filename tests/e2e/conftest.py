"""The real agent binaries against a live Cairn and a scripted model server.

These tests need the pinned ``claude`` and ``codex`` binaries that ``make e2e``
installs with npm into var/e2e/; ``make test`` does not collect them (``make e2e``
sets CAIRN_E2E=1). Each test gets its own HOME (so ~/.claude, ~/.config/cairn and the
hook's state are the test's), a scratch git project with a remote, and a model
server that also acts as the binaries' HTTP(S) proxy: anything they try to reach
outside 127.0.0.1 is refused and recorded in ``model.escapes``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.clients.conftest import script, tokens  # noqa: F401 - a fixture, used by the tests
from tests.e2e.model_server import ModelServer

if os.environ.get("CAIRN_E2E") != "1":
    collect_ignore_glob = ["test_*.py"]

ROOT = Path(__file__).resolve().parents[2]
E2E_BIN = ROOT / "var" / "e2e" / "node_modules" / ".bin"
FIXTURES = Path(__file__).parent / "fixtures"
RECORDER = Path(__file__).parent / "record_hook.py"
# Claude Code's switches for "no network call but the model's": no telemetry, no
# auto-update, no error reports, no feedback survey (DISABLE_NONESSENTIAL covers them
# all; the others are named too, in case one is read on its own).
QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "PIP_NO_INDEX": "1",  # the model's pip: a missing package fails at once
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
}


def binary(name: str) -> str:
    path = E2E_BIN / name
    assert path.exists(), f"{path} is missing: `make e2e` installs the pinned binaries"
    return str(path)


@pytest.fixture
def model():
    with ModelServer() as server:
        yield server


PROJECT_FILES = {
    "requirements.txt": "pytest\ncairn-e2e-missing-package==1.0\n",
    "test_cart.py": "def test_total():\n    assert 2 + 2 == 4\n",
    "test_broken.py.txt": "def test_broken():\n    assert False\n",
}


@dataclass
class ClaudeRun:
    returncode: int
    result: dict
    stderr: str
    wall_s: float


@dataclass
class Claude:
    """One machine with Claude Code on it: a HOME and a project, connected to Cairn
    the way docs/connect.md says."""

    home: Path
    project: Path
    model: ModelServer
    cairn_url: str
    payload_log: Path
    extra_env: dict = field(default_factory=dict)
    runs: int = 0

    def env(self) -> dict:
        path = os.pathsep.join(
            [str(Path(sys.executable).parent), str(E2E_BIN), "/usr/local/bin", "/usr/bin", "/bin"]
        )
        return {
            "PATH": path,
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
            "ANTHROPIC_BASE_URL": self.model.url,
            "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy",
            "HTTPS_PROXY": self.model.url,
            "HTTP_PROXY": self.model.url,
            "NO_PROXY": "127.0.0.1,localhost",
            **QUIET_ENV,
            **self.extra_env,
        }

    def install(self, harness_token: str, agent_token: str, *, url: str | None = None) -> None:
        """The documented steps: ``cairn-hook install claude-code`` and ``claude mcp add``."""
        url = url or self.cairn_url
        env = {**self.env(), "CAIRN_HARNESS_TOKEN": harness_token}
        subprocess.run(
            [script("cairn-hook"), "install", "claude-code", "--url", url],
            cwd=self.project,
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )
        subprocess.run(
            [binary("claude"), "mcp", "add", "--scope", "local", "cairn"]
            + ["--env", f"CAIRN_URL={url}", "--env", f"CAIRN_TOKEN={agent_token}"]
            + ["--", script("cairn-mcp")],
            cwd=self.project,
            env=self.env(),
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.record_payloads()

    def settings(self) -> dict:
        return json.loads((self.project / ".claude" / "settings.json").read_text())

    def record_payloads(self) -> None:
        """Put the payload recorder in front of each hook command (it hands the payload
        on unchanged), so a test sees what the binary really sent."""
        path = self.project / ".claude" / "settings.json"
        settings = json.loads(path.read_text())
        for entries in settings["hooks"].values():
            for entry in entries:
                for hook in entry["hooks"]:
                    if "record_hook.py" not in hook["command"]:
                        hook["command"] = (
                            f"{sys.executable} {RECORDER} {self.payload_log} -- {hook['command']}"
                        )
        path.write_text(json.dumps(settings, indent=2))

    def payloads(self) -> list[dict]:
        if not self.payload_log.exists():
            return []
        return [json.loads(line) for line in self.payload_log.read_text().splitlines() if line]

    def run(self, prompt: str, script_turns: list, *, timeout: float = 240) -> ClaudeRun:
        self.model.play(script_turns)
        started = time.monotonic()
        proc = subprocess.run(
            [binary("claude"), "-p", prompt, "--output-format", "json"]
            + ["--permission-mode", "acceptEdits"],
            cwd=self.project,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        wall = time.monotonic() - started
        # What the model server saw, kept beside the test's files for a failure's reader.
        self.runs += 1
        (self.home.parent / f"model-requests-{self.runs}.json").write_text(
            json.dumps(self.model.requests, indent=1, default=str)
        )
        try:
            result = json.loads(proc.stdout)
        except ValueError:
            result = {"raw": proc.stdout}
        return ClaudeRun(proc.returncode, result, proc.stderr, wall)


@pytest.fixture
def claude(tmp_path, model, live_server, tokens):  # noqa: F811 - the imported fixture
    # A first request loads the embedder and opens connections; a user's server has
    # long done that when a session starts. Warm, so the hooks' 1 s budget measures
    # Cairn, not this test server's cold start.
    for path, token in [("/api/v1/context/", "harness"), ("/api/v1/lessons/check/", "agent")]:
        httpx.get(
            live_server.url + path,
            params={"project_remote": "https://github.com/acme/warm.git", "operation_key": "x"},
            headers={"Authorization": f"Bearer {tokens[token]}"},
            timeout=60,
        )
    httpx.post(
        live_server.url + "/api/v1/recall/",
        json={"query": "warm up"},
        headers={"Authorization": f"Bearer {tokens['agent']}"},
        timeout=60,
    )
    home = tmp_path / "home"
    project = tmp_path / "shop"
    home.mkdir()
    project.mkdir()
    for name, text in PROJECT_FILES.items():
        (project / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(
        ["git", "remote", "add", "origin", "https://github.com/acme/shop.git"],
        cwd=project,
        check=True,
    )
    # Workspace trust: what accepting the trust dialog once writes. Without it Claude
    # Code ignores the project's permission rules in -p mode.
    (home / ".claude.json").write_text(
        json.dumps({"projects": {str(project): {"hasTrustDialogAccepted": True}}})
    )
    return Claude(
        home=home,
        project=project,
        model=model,
        cairn_url=live_server.url,
        payload_log=tmp_path / "payloads.jsonl",
    )


def bash(command: str, **extra) -> dict:
    from tests.e2e.model_server import tool

    return tool("Bash", {"command": command, "description": "run", **extra})
