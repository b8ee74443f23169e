"""GET /api/v1/jobs/{id}/ (admin token): a job of another workspace is a 404.
POST /api/v1/jobs/ (admin token): run a job now."""

import pytest

from memory.models import AuditEvent, JobRun
from tests.factories.identity import WorkspaceFactory
from tests.factories.maintenance import plant


@pytest.mark.django_db
def test_it_hides_other_workspaces_jobs(admin, make_api):
    other = make_api(workspace=WorkspaceFactory(), scope="admin")
    run = JobRun.objects.create(kind="export", workspace=other.agent.workspace)
    assert admin.get(f"/api/v1/jobs/{run.pk}/").status_code == 404
    assert admin.get(f"/api/v1/exports/{run.pk}/download/").status_code == 404
    assert other.get(f"/api/v1/jobs/{run.pk}/").status_code == 200


# --- POST /api/v1/jobs/: run a job now ---------------------------------------------------


@pytest.mark.django_db
def test_it_refuses_agent_tokens_and_unknown_kinds(api, admin):
    assert api.post("/api/v1/jobs/", {"kind": "reconcile"}, format="json").status_code == 403
    response = admin.post("/api/v1/jobs/", {"kind": "format_disk"}, format="json")
    assert response.status_code == 400 and "kind" in response.json()["error"]["fields"]
    response = admin.post("/api/v1/jobs/", {}, format="json")
    assert response.status_code == 400 and "kind" in response.json()["error"]["fields"]
    assert not JobRun.objects.exists()


@pytest.mark.django_db
def test_it_runs_jobs_for_its_own_workspace_only(admin):
    body = {"kind": "reconcile", "workspace": WorkspaceFactory().name}
    response = admin.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 403 and "workspace" in response.json()["error"]["fields"]
    assert not JobRun.objects.exists()


@pytest.mark.django_db
def test_a_double_click_queues_one_run(admin, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        first = admin.post("/api/v1/jobs/", {"kind": "consolidate"}, format="json")
        second = admin.post("/api/v1/jobs/", {"kind": "consolidate"}, format="json")
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    assert len(callbacks) == 1
    run = JobRun.objects.get()
    assert (run.kind, run.status, run.requested_by) == ("consolidate", "queued", "agent:ops")
    assert AuditEvent.objects.get(action="job.run_now").target_id == str(run.pk)


@pytest.mark.django_db(transaction=True)
def test_it_reconciles_now_on_a_real_worker(celery_worker_process, admin, wait_job):
    workspace = admin.agent.workspace
    plant(workspace)
    response = admin.post(
        "/api/v1/jobs/", {"kind": "reconcile", "workspace": workspace.name}, format="json"
    )
    assert response.status_code == 202
    body = wait_job(admin, response.json()["id"])
    assert (body["kind"], body["status"]) == ("reconcile", "succeeded")
    assert body["counts"]["contradictions_superseded"] == 1 and body["progress"] == 1.0
    # A global job (decay) runs too, recorded where the admin can see it.
    response = admin.post("/api/v1/jobs/", {"kind": "decay"}, format="json")
    assert wait_job(admin, response.json()["id"])["status"] == "succeeded"
