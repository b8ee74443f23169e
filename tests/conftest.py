"""Shared fixtures. Everything runs against the real services (see the README):
PostgreSQL with pgvector, Valkey, and real Celery worker processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.factories.identity import AgentFactory, WorkspaceFactory

BASE_DIR = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def _flush_test_broker():
    """Tests use their own broker db (CAIRN_REDIS_DB=1); start each session empty."""
    import redis

    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
    yield


def _worker_env(db_name: str) -> dict:
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "cairn.settings_test"
    env["CAIRN_DATABASE_NAME"] = db_name
    env["CAIRN_REDIS_DB"] = os.environ.get("CAIRN_REDIS_DB", "1")
    # The worker erases committed rows, so its VACUUM truncates (cairn/settings_test.py).
    env["CAIRN_ERASURE_VACUUM_TRUNCATE"] = "true"
    return env


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker):
    """A real `celery worker` subprocess consuming the real broker, using the test database."""
    from cairn.celery import app

    db_name = settings.DATABASES["default"]["NAME"]
    log_path = BASE_DIR / "var" / "test-worker.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "cairn",
            "worker",
            "--loglevel",
            "INFO",
            "--concurrency",
            "2",
            "--pool",
            "prefork",
            "--hostname",
            f"testworker-{os.getpid()}@%h",
            "--without-mingle",
            "--without-gossip",
        ],
        cwd=BASE_DIR,
        env=_worker_env(db_name),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"celery worker exited early:\n{log_path.read_text()[-3000:]}")
        if app.control.ping(timeout=0.5):
            break
    else:
        proc.terminate()
        raise RuntimeError(f"celery worker did not answer:\n{log_path.read_text()[-3000:]}")
    yield proc
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture
def workspace(db):
    return WorkspaceFactory()


@pytest.fixture
def agent(workspace):
    return AgentFactory(workspace=workspace)


@pytest.fixture
def api(agent):
    """An APIClient authenticated as ``agent`` with an agent-scoped token."""
    from rest_framework.test import APIClient

    from memory.identity.services import token_issue

    client = APIClient()
    issued = token_issue(agent=agent)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.raw}")
    client.agent = agent
    client.token = issued.token
    client.raw_token = issued.raw
    return client


@pytest.fixture
def harness(agent):
    """The same agent's harness: an APIClient with a harness-scoped token (the process
    that runs the tools; the model never sees this token)."""
    from tests.factories.identity import api_client

    return api_client(agent, scope="harness")


@pytest.fixture
def make_api(db):
    """Factory: an authenticated APIClient for a new agent (optionally in a workspace)."""
    from rest_framework.test import APIClient

    from memory.identity.services import token_issue

    def make(*, workspace=None, scope="agent", name=None):
        agent = AgentFactory(
            workspace=workspace or WorkspaceFactory(), **({"name": name} if name else {})
        )
        client = APIClient()
        issued = token_issue(agent=agent, scope=scope)
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.raw}")
        client.agent = agent
        client.token = issued.token
        return client

    return make


@pytest.fixture
def member_client(db, client):
    """Factory: a logged-in Django test client with ``role`` in ``workspace``."""
    from memory.identity.services import user_create

    counter = {"n": 0}

    def make(*, workspace, role):
        counter["n"] += 1
        user, _ = user_create(
            workspace=workspace,
            username=f"{role}{counter['n']}-{workspace.pk}",
            role=role,
            password="pw-for-tests-only",
        )
        client.force_login(user)
        client.user = user
        return client

    return make
