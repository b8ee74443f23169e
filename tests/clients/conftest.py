"""Fixtures for the client, harness CLI, hook and MCP tests: a live Cairn on the real
stack, tokens of each scope, and the environment the console scripts read."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memory.identity.services import token_issue

BIN = Path(sys.executable).parent
# The project's declared check in these tests: its pytest, run by the Stop hook itself,
# confined (cairn_client.checks). Model-run test commands are steps, never checks.
PYTEST_CHECK = f"test={sys.executable} -m pytest -q -p no:cacheprovider -p no:django"
# Its label: the operation key, behaviour flags included (-q only changes the output).
PYTEST_LABEL = "declared:pytest -p=no:cacheprovider -p=no:django"
PASSING_TEST = "def test_total():\n    assert 2 + 2 == 4\n"
FIXTURES = Path(__file__).parent / "fixtures"


def run_async(coro):
    """Run ``coro`` on its own event loop in its own thread: a browser test earlier in
    the session may leave Playwright's loop running in this one."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def script(name: str) -> str:
    path = shutil.which(name, path=str(BIN)) or shutil.which(name)
    assert path, f"{name} is not installed: make install puts clients/python in the venv"
    return path


@pytest.fixture
def tokens(agent):
    return {
        "agent": token_issue(agent=agent, scope="agent").raw,
        "harness": token_issue(agent=agent, scope="harness").raw,
    }


@pytest.fixture
def harness_env(live_server, tokens, tmp_path):
    """The environment a harness process runs in (its own state dir and session)."""
    env = dict(os.environ)
    env.update(
        CAIRN_URL=live_server.url,
        CAIRN_HARNESS_TOKEN=tokens["harness"],
        CAIRN_TOKEN=tokens["agent"],
        CAIRN_STATE_DIR=str(tmp_path / "state"),
        CAIRN_SESSION="sess-cli",
        # a cold test server can take seconds to answer its first request; the hooks'
        # default budget is tested against a sick server in test_hooks.py
        CAIRN_HOOK_BUDGET_S="20",
        CAIRN_HOOK_CHECKS=PYTEST_CHECK,
    )
    return env


@pytest.fixture
def repo(tmp_path):
    """A git checkout whose origin is the shop repository (the project's identity)."""
    path = tmp_path / "shop"
    path.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run(
        ["git", "remote", "add", "origin", "https://github.com/acme/shop.git"], cwd=path, check=True
    )
    (path / "test_cart.py").write_text(PASSING_TEST)
    return path
