"""Jobs never stuck ``queued``: a run no worker picked up within CAIRN_REAPER_QUEUED_S
lost its message (the broker or the database stopped while it waited). The reaper
fails it (or sends an erasure or export again), and "Run now" never answers with it.
"""

import datetime as dt

import pytest
from django.utils import timezone

from memory.core.jobs import job_recorded
from memory.models import JobRun
from memory.tasks import jobs_reap
from tests.factories.identity import WorkspaceFactory


def _queued(workspace, kind="decay", minutes_ago=0):
    run = JobRun.objects.create(kind=kind, workspace=workspace)
    JobRun.objects.filter(pk=run.pk).update(
        created_at=timezone.now() - dt.timedelta(minutes=minutes_ago)
    )
    run.refresh_from_db()
    return run


@pytest.mark.django_db(transaction=True)
def test_the_reaper_fails_a_queued_run_whose_message_is_gone(celery_worker_process, settings):
    settings.CAIRN_REAPER_QUEUED_S = 600
    workspace = WorkspaceFactory()
    stuck = _queued(workspace, minutes_ago=11)  # the database stopped; its message was spent
    waiting = _queued(workspace, kind="prune", minutes_ago=9)  # inside the bound
    result = jobs_reap()
    assert result["inspected"] >= 1 and result["lost"] == 1
    stuck.refresh_from_db()
    waiting.refresh_from_db()
    assert stuck.status == JobRun.Status.FAILED and stuck.finished_at is not None
    assert "Never started" in stuck.error and "600 s" in stuck.error
    assert waiting.status == JobRun.Status.QUEUED
    # A message that shows up late does not run the given-up run again.
    with job_recorded(kind="decay", run_id=stuck.pk) as run:
        assert run is None
    stuck.refresh_from_db()
    assert stuck.status == JobRun.Status.FAILED


@pytest.mark.django_db
def test_run_now_never_answers_with_a_dead_run(settings, make_api, member_client):
    settings.CAIRN_REAPER_QUEUED_S = 600
    workspace = WorkspaceFactory()
    admin = make_api(workspace=workspace, scope="admin", name="ops")
    dead = _queued(workspace, kind="consolidate", minutes_ago=30)
    response = admin.post("/api/v1/jobs/", {"kind": "consolidate"}, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["id"] != dead.pk
    assert response.json()["status"] == "queued"
    dead.refresh_from_db()
    assert dead.status == JobRun.Status.FAILED and "Never started" in dead.error
    # The UI's Run now goes through the same rule.
    dead_too = _queued(workspace, kind="reconcile", minutes_ago=30)
    ui = member_client(workspace=workspace, role="admin")
    assert ui.post("/jobs/run/reconcile/").status_code == 303
    fresh = JobRun.objects.filter(kind="reconcile").exclude(pk=dead_too.pk).get()
    assert fresh.status == JobRun.Status.QUEUED
    dead_too.refresh_from_db()
    assert dead_too.status == JobRun.Status.FAILED
    # A queued run inside the bound is still the one answered (a double click).
    again = admin.post("/api/v1/jobs/", {"kind": "consolidate"}, format="json")
    assert again.json()["id"] == response.json()["id"]
