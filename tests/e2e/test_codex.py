"""Codex CLI 0.171.0 itself, with ``cairn-mcp`` registered in its config.toml (under a
CODEX_HOME of the test's own), against the scripted Responses API server."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memory.models import Channel, Knowledge
from tests.clients.conftest import script
from tests.e2e.conftest import binary
from tests.e2e.model_server import ModelServer, text, tool

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """\
model = "gpt-e2e"
model_provider = "local"
check_for_update_on_startup = false

# No call but the model's: no metrics, no plugin catalogue, no update check.
[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
plugin_sharing = false
in_app_updates = false

[model_providers.local]
name = "local"
base_url = "{model}/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"

[mcp_servers.cairn]
command = "{cairn_mcp}"
required = true
default_tools_approval_mode = "approve"
env = {{ CAIRN_URL = "{cairn}", CAIRN_TOKEN = "{token}" }}
"""


def test_codex_uses_cairns_memory_tools(tmp_path, live_server, tokens):
    home = tmp_path / "codex"
    project = tmp_path / "shop"
    home.mkdir()
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    remembered = "Codex: the shop's tests run with python -m pytest -q."
    with ModelServer() as model:
        (home / "config.toml").write_text(
            CONFIG.format(
                model=model.url,
                cairn_mcp=script("cairn-mcp"),
                cairn=live_server.url,
                token=tokens["agent"],
            )
        )
        model.play(
            [
                [tool("mcp__cairn/remember", {"content": remembered})],
                [tool("mcp__cairn/recall", {"query": "how do the shop's tests run?"})],
                [text("Noted.")],
            ]
        )
        env = {
            "PATH": os.pathsep.join([str(os.path.dirname(sys.executable)), "/usr/bin", "/bin"]),
            "HOME": str(home),
            "CODEX_HOME": str(home),
            "OPENAI_API_KEY": "sk-e2e-dummy",
            "HTTPS_PROXY": model.url,
            "HTTP_PROXY": model.url,
            "NO_PROXY": "127.0.0.1,localhost",
            "RUST_LOG": "warn",
        }
        proc = subprocess.run(
            [binary("codex"), "exec", "--skip-git-repo-check", "Remember how the tests run"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0, proc.stderr
        tools = model.recorder.main_requests()[0]["tools"]
        results = model.recorder.tool_results()
        escapes = list(model.escapes)
    # Codex groups an MCP server's tools in one namespace, mcp__<server>.
    assert {"mcp__cairn/remember", "mcp__cairn/recall", "mcp__cairn/context"} <= set(tools)
    assert [r["name"] for r in results] == ["mcp__cairn/remember", "mcp__cairn/recall"], results
    item = Knowledge.objects.get(content=remembered)
    assert item.channel == Channel.AGENT
    assert remembered in results[1]["content"]
    assert escapes == [], escapes
