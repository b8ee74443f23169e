"""Docs that cannot rot: every shell snippet in docs/ and the README says whether it
runs, and every runnable one runs against a live server (docs/contributing/docs.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from docsgen.snippets import pages, shell_snippets, snippets
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
        # The client's commands (cairn-turn, cairn-check), installed beside this Python
        # by `make install` as pipx or `uv tool install` would put them on the PATH.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
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


PYTHON_RUNNABLE = [
    s
    for page in pages()
    for s in snippets(page)
    if s.language == "python" and s.marker == "runnable"
]


def test_some_python_snippets_run():
    assert PYTHON_RUNNABLE, "docs/connect.md's Python loop should be marked runnable"


@pytest.mark.parametrize("snippet", PYTHON_RUNNABLE, ids=[s.where for s in PYTHON_RUNNABLE])
def test_runnable_python_snippet_runs_against_a_live_server(
    snippet, live_server, transactional_db, celery_worker_process, tmp_path
):
    """A Python example runs as a user would run it: in a project of its own (an empty
    requirements.txt and one passing test), with the URL and tokens in the environment,
    twice, and each run is a new outcome (its ids are unique)."""
    from memory.models import Outcome

    workspace = workspace_get_or_create(name="default", display_name="Default workspace")
    agent = agent_get_or_create(workspace=workspace, name="my-agent")
    (tmp_path / "requirements.txt").write_text("")
    (tmp_path / "test_it.py").write_text("def test_it():\n    assert True\n")
    env = {
        **os.environ,
        "CAIRN_URL": live_server.url,
        "CAIRN_TOKEN": token_issue(agent=agent, scope="agent").raw,
        "CAIRN_HARNESS_TOKEN": token_issue(agent=agent, scope="harness").raw,
    }
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", snippet.code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{snippet.where} failed:\n{done.stdout}\n{done.stderr}"
        assert done.stdout.strip().endswith("True"), done.stdout
    assert Outcome.objects.filter(workspace=workspace).count() == 2
