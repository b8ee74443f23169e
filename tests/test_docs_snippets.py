"""Docs that cannot rot: every shell snippet in docs/ and the README says whether it
runs, and every runnable one runs against a live server (docs/contributing/docs.md)."""

from __future__ import annotations

import os
import subprocess

import pytest

from docsgen.snippets import shell_snippets
from memory.identity.services import agent_get_or_create, token_issue, workspace_get_or_create

RUNNABLE = [s for s in shell_snippets() if s.marker == "runnable"]


def test_every_shell_snippet_is_marked_runnable_or_illustrative():
    unmarked = [s.where for s in shell_snippets() if s.marker is None]
    assert not unmarked, f"mark these <!-- runnable --> or <!-- illustrative -->: {unmarked}"


def test_some_snippets_run():
    assert len(RUNNABLE) >= 4, [s.where for s in RUNNABLE]


@pytest.mark.parametrize("snippet", RUNNABLE, ids=[s.where for s in RUNNABLE])
def test_runnable_snippet_runs_against_a_live_server(
    snippet, live_server, transactional_db, celery_worker_process
):
    """With a real worker up, as under `make run` (`/healthz` counts the workers)."""
    workspace = workspace_get_or_create(name="default", display_name="Default workspace")
    agent = agent_get_or_create(workspace=workspace, name="my-agent")
    env = {
        **os.environ,
        "TOKEN": token_issue(agent=agent, scope="agent").raw,
        "HARNESS_TOKEN": token_issue(agent=agent, scope="harness").raw,
        "ADMIN_TOKEN": token_issue(agent=agent, scope="admin").raw,
        "CAIRN_URL": live_server.url,
    }
    code = snippet.code.replace("http://localhost:8000", live_server.url)
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{snippet.where} failed:\n{done.stdout}\n{done.stderr}"
