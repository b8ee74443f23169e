"""A part down is a 503 with Retry-After in the error shape, never a 500 or a hang.

Real processes: gunicorn serving the test database, pointed at a database or a
broker that is not there (a closed port), as when one is stopped mid-run.
"""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from memory.models import ErasureReceipt, ErasureStatus, JobRun
from tests.factories.identity import WorkspaceFactory
from tests.factories.privacy import workspace_ready

BASE = Path(__file__).resolve().parent.parent


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket closes


@pytest.fixture
def serve():
    procs = []

    def start(**env_extra):
        port = _closed_port()
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE="cairn.settings_test",
            CAIRN_DATABASE_NAME=settings.DATABASES["default"]["NAME"],
            CAIRN_REDIS_DB="1",
            **env_extra,
        )
        proc = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "cairn.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "1",
                "--timeout",
                "60",
            ],
            cwd=BASE,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(url + "/healthz", timeout=5)
                return url
            except httpx.TransportError:
                time.sleep(0.2)
        raise RuntimeError("gunicorn did not start")

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=20)


def _assert_503(response):
    assert response.status_code == 503, response.text
    assert int(response.headers["Retry-After"]) > 0
    assert set(response.json()["error"]) == {"code", "message", "fields"}


@pytest.mark.django_db(transaction=True)
def test_database_down_is_a_503_on_every_api_path_and_a_clear_page(serve):
    url = serve(DATABASE_URL=f"postgres://postgres@127.0.0.1:{_closed_port()}/cairn")
    headers = {"Authorization": "Bearer cairn_x"}
    for method, path in [
        ("GET", "/api/v1/knowledge/"),
        ("POST", "/api/v1/knowledge/"),
        ("GET", "/api/v1/agents/me/"),
        ("POST", "/api/v1/recall/"),
        ("POST", "/api/v1/exports/"),
        ("GET", "/api/v1/skills/x/effective/"),
    ]:
        response = httpx.request(method, url + path, headers=headers, json={}, timeout=15)
        _assert_503(response)
        assert response.json()["error"]["code"] == "database_unavailable", path
    # A signed-in reviewer's page (the session lives in the database).
    page = httpx.get(url + "/dashboard/", cookies={"sessionid": "s" * 32}, timeout=15)
    assert page.status_code == 503
    assert "temporarily unavailable" in page.text


def _admin_token(workspace):
    from memory.identity.services import token_issue
    from tests.factories.identity import AgentFactory

    return token_issue(agent=AgentFactory(workspace=workspace), scope="admin").raw


@pytest.mark.django_db(transaction=True)
def test_broker_down_fails_exports_and_erasures_fast_and_marks_them_failed(serve):
    url = serve(REDIS_URL=f"redis://127.0.0.1:{_closed_port()}")
    workspace = WorkspaceFactory()
    workspace_ready(workspace)
    headers = {"Authorization": f"Bearer {_admin_token(workspace)}"}

    started = time.monotonic()
    response = httpx.post(url + "/api/v1/exports/", headers=headers, json={}, timeout=30)
    assert time.monotonic() - started < 5
    _assert_503(response)
    assert response.json()["error"]["code"] == "broker_unavailable"
    run = JobRun.objects.get(kind="export", workspace=workspace)
    assert run.status == JobRun.Status.FAILED
    assert "broker" in run.error

    started = time.monotonic()
    response = httpx.post(
        url + "/api/v1/erasures/",
        headers=headers,
        json={"selector": {"context": "gaia/chat"}, "confirm": workspace.name},
        timeout=30,
    )
    assert time.monotonic() - started < 5
    _assert_503(response)
    receipt = ErasureReceipt.objects.get(workspace=workspace)
    assert receipt.status == ErasureStatus.FAILED
    assert receipt.job_run.status == JobRun.Status.FAILED


@pytest.mark.django_db(transaction=True)
def test_effective_skill_is_served_without_the_cache_when_it_is_down(serve):
    from memory.identity.services import token_issue
    from tests.factories.skills import learning_agent

    workspace = WorkspaceFactory()
    agent = learning_agent(workspace)
    token = token_issue(agent=agent).raw
    url = serve(REDIS_URL=f"redis://127.0.0.1:{_closed_port()}")
    response = httpx.get(
        url + "/api/v1/skills/triage-inbox/effective/",
        params={"session_id": "s-1"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert response.json()["cached"] is False
