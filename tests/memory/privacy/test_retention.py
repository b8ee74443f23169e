"""The prune job: raw history, job runs, audit, receipts, replays and export files age out."""

import os
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from memory.models import AuditEvent, ErasureReceipt, IdempotencyRecord, JobRun
from memory.privacy.exports import export_dir
from memory.privacy.retention import retention_prune
from memory.tasks import prune
from tests.factories.identity import AgentFactory, WorkspaceFactory


def _aged(model, field, delta, **fields):
    row = model.objects.create(**fields)
    model.objects.filter(pk=row.pk).update(**{field: timezone.now() - delta})
    return row


@pytest.mark.django_db
def test_it_deletes_only_what_outlived_its_retention(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    workspace = WorkspaceFactory()
    agent = AgentFactory(workspace=workspace)
    audit_days = settings.CAIRN_RETENTION_AUDIT_DAYS
    old_event = _aged(
        AuditEvent, "created_at", timedelta(days=audit_days + 1), actor="x", action="a"
    )
    new_event = _aged(
        AuditEvent, "created_at", timedelta(days=audit_days - 1), actor="x", action="a"
    )
    run_days = settings.CAIRN_RETENTION_JOB_RUNS_DAYS
    old_run = _aged(
        JobRun, "finished_at", timedelta(days=run_days + 1), kind="x", status="succeeded"
    )
    running = _aged(JobRun, "created_at", timedelta(days=run_days + 5), kind="x", status="running")
    old_receipt = _aged(
        ErasureReceipt,
        "finished_at",
        timedelta(days=audit_days + 1),
        workspace_name="w",
        requested_by="u",
        selector={},
    )
    kept_receipt = _aged(
        ErasureReceipt,
        "finished_at",
        timedelta(days=run_days + 1),  # older than job runs, younger than the audit period
        workspace_name="w",
        requested_by="u",
        selector={},
    )
    hours = settings.CAIRN_RETENTION_IDEMPOTENCY_HOURS
    replay = dict(workspace=workspace, agent=agent, method="POST", path="/p", request_digest="d")
    old_replay = _aged(
        IdempotencyRecord,
        "created_at",
        timedelta(hours=hours + 1),
        key="old",
        status_code=201,
        response_body=b"{}",
        **replay,
    )
    new_replay = _aged(
        IdempotencyRecord,
        "created_at",
        timedelta(hours=hours - 1),
        key="new",
        status_code=201,
        response_body=b"{}",
        **replay,
    )
    directory = export_dir(workspace)
    directory.mkdir(parents=True, exist_ok=True)
    stale, fresh = directory / "old.json", directory / "new.json"
    stale.write_text("{}")
    fresh.write_text("{}")
    aged = time.time() - (settings.CAIRN_RETENTION_EXPORT_DAYS + 1) * 86400
    os.utime(stale, (aged, aged))

    counts = retention_prune()

    assert counts["audit_events"] == 1 and counts["job_runs"] == 1
    assert counts["erasure_receipts"] == 1 and counts["idempotency_records"] == 1
    assert counts["export_files"] == 1
    assert not AuditEvent.objects.filter(pk=old_event.pk).exists()
    assert AuditEvent.objects.filter(pk=new_event.pk).exists()
    assert not JobRun.objects.filter(pk=old_run.pk).exists()
    assert JobRun.objects.filter(pk=running.pk).exists()  # never a run still going
    assert not ErasureReceipt.objects.filter(pk=old_receipt.pk).exists()
    assert ErasureReceipt.objects.filter(pk=kept_receipt.pk).exists()
    assert not IdempotencyRecord.objects.filter(pk=old_replay.pk).exists()
    assert IdempotencyRecord.objects.filter(pk=new_replay.pk).exists()
    assert not stale.exists() and fresh.exists()


def test_it_is_scheduled_on_beat():
    from cairn import settings as production

    assert production.CELERY_BEAT_SCHEDULE["prune"]["task"] == "memory.tasks.prune"
    assert settings.CAIRN_RETENTION_RAW_DAYS == 90
    assert settings.CAIRN_RETENTION_IDEMPOTENCY_HOURS == 24


@pytest.mark.django_db(transaction=True)
def test_it_runs_in_a_real_worker_and_records_its_counts(celery_worker_process):
    run_id = prune.delay().get(timeout=60)
    run = JobRun.objects.get(pk=run_id)
    assert run.kind == "prune" and run.status == JobRun.Status.SUCCEEDED
    assert {"audit_events", "job_runs", "idempotency_records", "export_files"} <= set(run.counts)
