"""POST /exports/ and the download, and the admin-token gate of every admin endpoint."""

import pytest

from tests.factories.identity import WorkspaceFactory
from tests.factories.privacy import bundle, ready_agent, workspace_ready

ENDPOINTS = [
    ("post", "/api/v1/exports/", {}),
    ("post", "/api/v1/erasures/", {"selector": {"context": "x"}, "confirm": "x"}),
    ("post", "/api/v1/erasures/preview/", {"selector": {"context": "x"}}),
    ("get", "/api/v1/jobs/1/", None),
    ("get", "/api/v1/exports/1/download/", None),
]


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


@pytest.mark.django_db(transaction=True)
def test_it_exports_in_a_worker_and_serves_the_file(celery_worker_process, make_api, wait_job):
    workspace = WorkspaceFactory()
    workspace_ready(workspace)
    bundle(agent=ready_agent(workspace, "gaia/chat"), name="alpha")
    admin = make_api(workspace=workspace, scope="admin", name="ops")
    response = admin.post("/api/v1/exports/", {"format": "jsonl"}, format="json")
    assert response.status_code == 202
    job = wait_job(admin, response.json()["job_id"])
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


@pytest.mark.django_db
def test_a_download_an_erasure_deleted_says_so(make_api, settings, tmp_path):
    from memory.models import JobRun
    from memory.privacy.exports import export_files_forget, export_job

    settings.MEDIA_ROOT = tmp_path
    workspace = WorkspaceFactory()
    run = JobRun.objects.create(
        kind="export",
        workspace=workspace,
        params={"selector": {"kind": "workspace", "value": workspace.name}, "format": "json"},
        status=JobRun.Status.SUCCEEDED,
    )
    export_job(run=run)
    run.save()
    export_files_forget(workspace=workspace, erasure=41)
    admin = make_api(workspace=workspace, scope="admin", name="ops")
    response = admin.get(f"/api/v1/exports/{run.pk}/download/")
    assert response.status_code == 404
    assert "deleted by erasure #41" in response.json()["error"]["message"]
    assert "download_url" not in admin.get(f"/api/v1/jobs/{run.pk}/").json()
