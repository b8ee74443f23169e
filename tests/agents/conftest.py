"""Fixtures shared by the agent-API tests of several resources."""

import time

import pytest

from tests.factories.skills import declare_tools, register


@pytest.fixture
def ready(api):
    """A registered triage-inbox skill and the email agent's tool registry."""
    assert register(api).status_code == 201
    declare_tools(api)
    return api


@pytest.fixture
def admin(make_api, workspace):
    return make_api(workspace=workspace, scope="admin", name="ops")


@pytest.fixture
def wait_job():
    """Poll GET /api/v1/jobs/{id}/ until the job has finished."""

    def _wait_job(client, job_id, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            body = client.get(f"/api/v1/jobs/{job_id}/").json()
            if body["status"] in ("succeeded", "failed", "skipped"):
                return body
            time.sleep(0.2)
        raise AssertionError("job did not finish")

    return _wait_job
