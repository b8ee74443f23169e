"""The reaper (memory.tasks.jobs_reap): runs whose worker is gone are resumed or
marked ``interrupted`` with a message the UI and the API show."""

import datetime as dt

import pytest
from django.utils import timezone

from memory.models import JobRun
from memory.tasks import jobs_reap
from tests.factories.identity import WorkspaceFactory


@pytest.mark.django_db(transaction=True)
def test_a_dead_non_resumable_run_is_marked_interrupted_and_says_so(
    celery_worker_process, make_api, member_client
):
    workspace = WorkspaceFactory()
    long_ago = timezone.now() - dt.timedelta(minutes=10)
    dead = JobRun.objects.create(
        kind="decay", workspace=workspace, status="running", started_at=long_ago, task_id="gone"
    )
    fresh = JobRun.objects.create(
        kind="decay", workspace=workspace, status="running", started_at=timezone.now()
    )
    result = jobs_reap()
    assert result["inspected"] >= 1  # a live worker answered
    dead.refresh_from_db()
    fresh.refresh_from_db()
    assert dead.status == JobRun.Status.INTERRUPTED
    assert dead.finished_at is not None
    assert "worker stopped mid-run" in dead.error
    assert fresh.status == JobRun.Status.RUNNING  # inside the grace period: left alone

    admin = make_api(workspace=workspace, scope="admin", name="ops")
    body = admin.get(f"/api/v1/jobs/{dead.pk}/").json()
    assert body["status"] == "interrupted"
    assert "worker stopped mid-run" in body["error"]
    page = member_client(workspace=workspace, role="admin").get(f"/jobs/{dead.pk}/")
    assert b"worker stopped mid-run" in page.content
