"""POST /exports/, POST /erasures/ (+ preview), GET /jobs/{id}/ and the download."""

import time

import pytest

from memory.models import ErasureReceipt, JobRun, Knowledge
from tests.factories import WorkspaceFactory
from tests.factories_erasure import bundle, new_marker, ready_agent, sql_sweep, workspace_ready

ENDPOINTS = [
    ("post", "/api/v1/exports/", {}),
    ("post", "/api/v1/erasures/", {"selector": {"context": "x"}, "confirm": "x"}),
    ("post", "/api/v1/erasures/preview/", {"selector": {"context": "x"}}),
    ("get", "/api/v1/jobs/1/", None),
    ("get", "/api/v1/exports/1/download/", None),
]


@pytest.fixture
def admin(make_api, workspace):
    return make_api(workspace=workspace, scope="admin", name="ops")


def _wait_job(client, job_id, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/api/v1/jobs/{job_id}/").json()
        if body["status"] in ("succeeded", "failed", "skipped"):
            return body
        time.sleep(0.2)
    raise AssertionError("job did not finish")


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "url", "body"), ENDPOINTS)
def test_it_refuses_agent_tokens(api, method, url, body):
    response = getattr(api, method)(url, body, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "url", "body"), ENDPOINTS)
def test_it_refuses_no_token(client, method, url, body):
    response = getattr(client, method)(url, body, content_type="application/json")
    assert response.status_code in (401, 403)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body", [{"selector": {"context": "c"}}, {"selector": {"context": "c"}, "confirm": "nope"}]
)
def test_it_wants_the_workspace_name_typed_to_erase(admin, body):
    response = admin.post("/api/v1/erasures/", body, format="json")
    assert response.status_code == 422
    assert "confirm" in response.json()["error"]["fields"]
    assert not ErasureReceipt.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"confirm": "w"}, 400, "selector"),
        ({"selector": {}, "confirm": "w"}, 400, "selector"),
        ({"selector": {"text": "ab"}, "confirm": "w"}, 400, "selector.text"),
        ({"selector": {"skill": "triage"}, "confirm": "w"}, 400, "selector.skill"),
        ({"selector": {"agent": "nobody"}, "confirm": "w"}, 422, "selector.agent"),
        ({"selector": {"context": "a", "session": "b"}, "confirm": "w"}, 400, "selector"),
        ({"selector": "everything", "confirm": "w"}, 400, "selector.non_field_errors"),
    ],
)
def test_it_names_the_bad_field(admin, body, status, field):
    response = admin.post("/api/v1/erasures/", body, format="json")
    assert response.status_code == status, response.json()
    assert field in response.json()["error"]["fields"]


@pytest.mark.django_db
def test_it_previews_counts_per_table_without_deleting(admin, workspace):
    workspace_ready(workspace)
    agent = ready_agent(workspace, "gaia/chat")
    gone = bundle(agent=agent, name="gone")
    response = admin.post(
        "/api/v1/erasures/preview/", {"selector": {"session": gone.session}}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["counts"]["memory.Knowledge"] == 2  # the item and the session's error item
    assert body["counts"]["memory.SkillDelta"] == 1
    assert body["total"] == sum(body["counts"].values())
    assert Knowledge.objects.filter(pk__in=gone.knowledge).exists()


@pytest.mark.django_db
def test_it_hides_other_workspaces_jobs(admin, make_api):
    other = make_api(workspace=WorkspaceFactory(), scope="admin")
    run = JobRun.objects.create(kind="export", workspace=other.agent.workspace)
    assert admin.get(f"/api/v1/jobs/{run.pk}/").status_code == 404
    assert admin.get(f"/api/v1/exports/{run.pk}/download/").status_code == 404
    assert other.get(f"/api/v1/jobs/{run.pk}/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_it_exports_in_a_worker_and_serves_the_file(celery_worker_process, make_api):
    workspace = WorkspaceFactory()
    workspace_ready(workspace)
    bundle(agent=ready_agent(workspace, "gaia/chat"), name="alpha")
    admin = make_api(workspace=workspace, scope="admin", name="ops")
    response = admin.post("/api/v1/exports/", {"format": "jsonl"}, format="json")
    assert response.status_code == 202
    job = _wait_job(admin, response.json()["job_id"])
    assert job["kind"] == "export" and job["status"] == "succeeded"
    assert job["progress"] == 1.0
    assert job["counts"]["knowledge"] == 2  # an item and an error item
    download = admin.get(job["download_url"])
    assert download.status_code == 200
    text = b"".join(download.streaming_content).decode()
    assert '"type":"header"' in text.splitlines()[0]
    assert "The alpha team deploys on Fridays." in text
    # Never a public URL: without the token, or with an agent token, no file.
    assert admin.__class__().get(job["download_url"]).status_code in (401, 403)
    agent_api = make_api(workspace=workspace, name="plain")
    assert agent_api.get(job["download_url"]).status_code == 403


@pytest.mark.django_db(transaction=True)
def test_it_erases_in_a_worker_and_answers_with_a_receipt(celery_worker_process, make_api):
    workspace = WorkspaceFactory()
    workspace_ready(workspace)
    marker = new_marker()
    agent = ready_agent(workspace, "gaia/chat")
    bundle(agent=agent, name="gone", marker=marker, marked=frozenset({"knowledge", "delta"}))
    kept = bundle(agent=agent, name="kept")
    admin = make_api(workspace=workspace, scope="admin", name="ops")
    response = admin.post(
        "/api/v1/erasures/",
        {"selector": {"text": marker}, "confirm": workspace.name, "reason": "ticket 7"},
        format="json",
    )
    assert response.status_code == 202
    job = _wait_job(admin, response.json()["job_id"])
    assert job["kind"] == "erasure" and job["status"] == "succeeded"
    receipt = job["receipt"]
    assert receipt["status"] == "completed"
    assert receipt["counts"]["memory.Knowledge"] == 1
    assert receipt["counts"]["memory.SkillDelta"] == 1
    assert receipt["selector"] == {
        "kind": "text",
        "sha256": receipt["selector"]["sha256"],
        "length": len(marker),
    }
    assert receipt["requested_by"] == "agent:ops"
    assert len(receipt["digest"]) == 64
    assert sql_sweep(marker) == {}
    assert Knowledge.objects.filter(pk__in=kept.knowledge).exists()
