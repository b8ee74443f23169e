"""Celery tasks: thin wrappers that call services and record a JobRun."""

from __future__ import annotations

import os
import socket

from celery import shared_task

from memory.backfill import embed_backfill_run
from memory.core.jobs import job_recorded
from memory.lessons.decay import decay_run
from memory.lessons.services import lesson_caps_enforce
from memory.maintenance.consolidate import consolidate_run
from memory.maintenance.reconcile import reconcile_run
from memory.models import JobRun, Workspace
from memory.privacy.erasure import erasure_job
from memory.privacy.exports import export_job
from memory.privacy.retention import retention_prune
from memory.skills.jobs import delta_budget_enforce, delta_consolidate


@shared_task(name="memory.tasks.heartbeat")
def heartbeat(run_id: int | None = None) -> int:
    """Prove the broker → worker → database path works; records a JobRun."""
    with job_recorded(kind="heartbeat", run_id=run_id, task_id=heartbeat.request.id or "") as run:
        if run is None:
            return 0
        run.counts = {"ok": 1}
        run.result = {"worker": f"{socket.gethostname()}:{os.getpid()}"}
        return run.pk


# Jobs over every workspace take one lock, whether beat or an admin's "run now" started them.
GLOBAL_LOCK = "job:{}:*"


def _workspace(workspace_id: int | None):

    return Workspace.objects.get(pk=workspace_id) if workspace_id else None


@shared_task(name="memory.tasks.skills_budget")
def skills_budget(run_id: int | None = None, workspace_id: int | None = None) -> int | None:
    """Hold every agent's resident tier-3 deltas under the token budget (SPEC section 6)."""

    workspace = _workspace(workspace_id)
    with job_recorded(
        kind="skills.budget",
        workspace=workspace,
        run_id=run_id,
        task_id=skills_budget.request.id or "",
    ) as run:
        if run is None:
            return None
        run.counts = delta_budget_enforce(workspace=workspace)
        return run.pk


@shared_task(name="memory.tasks.skills_consolidate")
def skills_consolidate(run_id: int | None = None, workspace_id: int | None = None) -> int | None:
    """Propose staged umbrella deltas for near-identical deltas on one anchor."""

    workspace = _workspace(workspace_id)
    with job_recorded(
        kind="skills.consolidate",
        workspace=workspace,
        run_id=run_id,
        task_id=skills_consolidate.request.id or "",
    ) as run:
        if run is None:
            return None
        run.counts = delta_consolidate(workspace=workspace)
        return run.pk


@shared_task(name="memory.tasks.decay")
def decay(run_id: int | None = None) -> int:
    """Daily (beat): idle-time decay of lessons and knowledge; safe to run twice."""
    with job_recorded(
        kind="decay",
        run_id=run_id,
        task_id=decay.request.id or "",
        lock=GLOBAL_LOCK.format("decay"),
    ) as run:
        if run is None:
            return 0
        run.counts = decay_run()
        return run.pk


@shared_task(name="memory.tasks.maintenance")
def maintenance(run_id: int | None = None) -> int:
    """Daily (beat): enforce the lesson caps (lowest confidence beyond the cap retired)."""
    with job_recorded(
        kind="maintenance",
        run_id=run_id,
        task_id=maintenance.request.id or "",
        lock=GLOBAL_LOCK.format("maintenance"),
    ) as run:
        if run is None:
            return 0
        run.counts = lesson_caps_enforce()
        return run.pk


@shared_task(name="memory.tasks.embed_backfill")
def embed_backfill(run_id: int | None = None) -> int:
    """Re-embed rows from another (or no) embedder, with progress; safe to run twice."""

    with job_recorded(
        kind="embed_backfill",
        run_id=run_id,
        task_id=embed_backfill.request.id or "",
        lock=GLOBAL_LOCK.format("embed_backfill"),
    ) as run:
        if run is None:
            return 0
        run.counts = embed_backfill_run(run=run)
        return run.pk


@shared_task(name="memory.tasks.export_run")
def export_run(run_id: int) -> int | None:
    """Write an export file for a queued export run (SPEC sections 7 and 8)."""

    run = JobRun.objects.select_related("workspace").get(pk=run_id)
    with job_recorded(
        kind="export",
        workspace=run.workspace,
        run_id=run_id,
        task_id=export_run.request.id or "",
        lock=f"job:export:run:{run_id}",
    ) as run:
        if run is None:
            return None
        export_job(run=run)
        return run.pk


@shared_task(name="memory.tasks.erasure_run")
def erasure_run(run_id: int, selector: dict) -> int | None:
    """Erase what ``selector`` reaches. The selector's value travels only in this
    message: the database keeps its digest (SPEC principle 4)."""

    run = JobRun.objects.select_related("workspace").get(pk=run_id)
    if run.status not in (JobRun.Status.QUEUED, JobRun.Status.RUNNING):
        return None  # a redelivered message for a run that already finished
    with job_recorded(
        kind="erasure",
        workspace=run.workspace,
        run_id=run_id,
        task_id=erasure_run.request.id or "",
        lock=f"job:erasure:run:{run_id}",
    ) as run:
        if run is None:
            return None
        erasure_job(run=run, message=selector)
        return run.pk


@shared_task(name="memory.tasks.prune")
def prune(run_id: int | None = None) -> int | None:
    """Delete raw history, job runs, audit events and replays past their retention."""

    with job_recorded(
        kind="prune",
        run_id=run_id,
        task_id=prune.request.id or "",
        lock=GLOBAL_LOCK.format("prune"),
    ) as run:
        if run is None:
            return None
        run.counts = retention_prune()
        return run.pk


@shared_task(name="memory.tasks.reconcile")
def reconcile(run_id: int | None = None, workspace_id: int | None = None) -> int | None:
    """Merge duplicates, supersede contradictions, queue what people must settle.

    Resumable: a run after a killed worker continues from the last checkpoint."""
    workspace = _workspace(workspace_id)
    with job_recorded(
        kind="reconcile", workspace=workspace, run_id=run_id, task_id=reconcile.request.id or ""
    ) as run:
        if run is None:
            return None
        run.counts = reconcile_run(run=run)
        return run.pk


@shared_task(name="memory.tasks.consolidate")
def consolidate(run_id: int | None = None, workspace_id: int | None = None) -> int | None:
    """Old sessions become summary notes and extracted items; turns marked consolidated."""
    workspace = _workspace(workspace_id)
    with job_recorded(
        kind="consolidate",
        workspace=workspace,
        run_id=run_id,
        task_id=consolidate.request.id or "",
    ) as run:
        if run is None:
            return None
        run.counts = consolidate_run(run=run)
        return run.pk
