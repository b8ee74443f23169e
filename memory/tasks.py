"""Celery tasks: thin wrappers that call services and record a JobRun."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

from celery import current_app, shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.utils import timezone

from memory.backfill import embed_backfill_run
from memory.core.jobs import job_recorded, job_run_give_up, job_run_lost
from memory.lessons.caps import lesson_caps_enforce
from memory.lessons.decay import decay_run
from memory.maintenance.consolidate import consolidate_run
from memory.maintenance.reconcile import reconcile_run
from memory.models import JobRun, Workspace
from memory.privacy.erasure import erasure_interrupted, erasure_job
from memory.privacy.exports import export_job
from memory.privacy.retention import retention_prune
from memory.skills.jobs import delta_budget_enforce, delta_consolidate
from memory.webhooks.delivery import delivery_attempt


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


def _counted_run(
    task, *, kind: str, count, run_id: int | None, workspace=None, skipped=None, lock=None
):
    """Run ``count(run)`` inside ``task``'s JobRun of ``kind`` and record what it returns
    as the run's counts: the run's id, or ``skipped`` when the run does not go ahead."""
    with job_recorded(
        kind=kind, workspace=workspace, run_id=run_id, task_id=task.request.id or "", lock=lock
    ) as run:
        if run is None:
            return skipped
        run.counts = count(run)
        return run.pk


@shared_task(name="memory.tasks.skills_budget")
def skills_budget(run_id: int | None = None, workspace_id: int | None = None) -> int | None:
    """Hold every agent's resident tier-3 deltas under the token budget (SPEC section 6)."""
    workspace = _workspace(workspace_id)
    return _counted_run(
        skills_budget,
        kind="skills.budget",
        workspace=workspace,
        run_id=run_id,
        count=lambda run: delta_budget_enforce(workspace=workspace),
    )


@shared_task(name="memory.tasks.skills_consolidate")
def skills_consolidate(run_id: int | None = None, workspace_id: int | None = None) -> int | None:
    """Propose staged umbrella deltas for near-identical deltas on one anchor."""
    workspace = _workspace(workspace_id)
    return _counted_run(
        skills_consolidate,
        kind="skills.consolidate",
        workspace=workspace,
        run_id=run_id,
        count=lambda run: delta_consolidate(workspace=workspace),
    )


@shared_task(name="memory.tasks.decay")
def decay(run_id: int | None = None) -> int:
    """Daily (beat): idle-time decay of lessons and knowledge; safe to run twice."""
    return _counted_run(
        decay,
        kind="decay",
        run_id=run_id,
        count=lambda run: decay_run(),
        skipped=0,
        lock=GLOBAL_LOCK.format("decay"),
    )


@shared_task(name="memory.tasks.maintenance")
def maintenance(run_id: int | None = None) -> int:
    """Daily (beat): enforce the lesson caps (lowest confidence beyond the cap retired)."""
    return _counted_run(
        maintenance,
        kind="maintenance",
        run_id=run_id,
        count=lambda run: lesson_caps_enforce(),
        skipped=0,
        lock=GLOBAL_LOCK.format("maintenance"),
    )


@shared_task(name="memory.tasks.embed_backfill")
def embed_backfill(run_id: int | None = None) -> int:
    """Re-embed rows from another (or no) embedder, with progress; safe to run twice."""
    return _counted_run(
        embed_backfill,
        kind="embed_backfill",
        run_id=run_id,
        count=lambda run: embed_backfill_run(run=run),
        skipped=0,
        lock=GLOBAL_LOCK.format("embed_backfill"),
    )


@shared_task(name="memory.tasks.export_run")
def export_run(run_id: int) -> int | None:
    """Write an export file for a queued export run (SPEC sections 7 and 8)."""

    run = JobRun.objects.select_related("workspace").get(pk=run_id)
    if run.status not in (JobRun.Status.QUEUED, JobRun.Status.RUNNING):
        return None  # a redelivered message for a run that already finished
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
def erasure_run(run_id: int, selector: dict | None = None) -> int | None:
    """Erase what the run's selector reaches. The message carries the run id only:
    the value waits in an ErasureSelector row the job deletes (``selector`` is
    accepted from messages queued before that change)."""

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


# --- the reaper: runs whose worker died -------------------------------------------

# Resumable kinds are sent again: erasure continues from what is left (its receipt
# already counts what went), export writes its file again from the start.
RESUMABLE = {"erasure": "memory.tasks.erasure_run", "export": "memory.tasks.export_run"}


@shared_task(name="memory.tasks.jobs_reap")
def jobs_reap() -> dict:
    """Find ``running`` runs whose task no live worker is executing, and ``queued``
    runs no worker picked up in time (their message is gone); resume or mark them.

    Runs on every worker start (worker_ready) and on beat. A worker killed with
    SIGKILL acks nothing and records nothing: its run stayed ``running`` forever
    and its message waited out the broker's visibility timeout. When no worker
    answers the inspection, nothing is touched (nobody can tell what is alive).
    """
    replies = current_app.control.inspect(timeout=settings.CAIRN_REAPER_INSPECT_S).active()
    if not replies:
        return {"inspected": 0}
    alive = {task["id"] for tasks in replies.values() for task in tasks or []}
    cutoff = timezone.now() - timedelta(seconds=settings.CAIRN_REAPER_GRACE_S)
    out = {"inspected": len(replies), "resumed": 0, "interrupted": 0, "lost": 0}
    out["lost"], out["resumed"] = _queued_reap()
    for run in JobRun.objects.filter(status=JobRun.Status.RUNNING, started_at__lt=cutoff):
        if run.task_id and run.task_id in alive:
            continue
        task = RESUMABLE.get(run.kind)
        attempts = int((run.result or {}).get("resumed", 0))
        if task and attempts < settings.CAIRN_REAPER_MAX_RESUMES:
            claimed = JobRun.objects.filter(pk=run.pk, status=JobRun.Status.RUNNING).update(
                status=JobRun.Status.QUEUED,
                result={
                    **(run.result or {}),
                    "resumed": attempts + 1,
                    "queued_at": timezone.now().isoformat(),
                },
            )
            if claimed:
                current_app.send_task(task, args=[run.pk])
                out["resumed"] += 1
            continue
        claimed = JobRun.objects.filter(pk=run.pk, status=JobRun.Status.RUNNING).update(
            status=JobRun.Status.INTERRUPTED,
            finished_at=timezone.now(),
            error="Interrupted: its worker stopped mid-run (killed or restarted). "
            + (
                "It was resumed too many times; start it again."
                if task
                else "The next scheduled run does this work again."
            ),
        )
        if claimed and run.kind == "erasure":
            erasure_interrupted(run=run, reason="worker lost")
        out["interrupted"] += claimed
    return out


def _queued_reap() -> tuple[int, int]:
    """Queued runs whose message is gone (``job_run_lost``): resumable kinds are sent
    again (within CAIRN_REAPER_MAX_RESUMES), the rest marked failed. Returns (failed,
    sent again)."""
    lost = sent = 0
    for run in JobRun.objects.filter(status=JobRun.Status.QUEUED).order_by("pk"):
        if not job_run_lost(run):
            continue
        task = RESUMABLE.get(run.kind)
        attempts = int((run.result or {}).get("resumed", 0))
        if task and attempts < settings.CAIRN_REAPER_MAX_RESUMES:
            result = {
                **(run.result or {}),
                "resumed": attempts + 1,
                "queued_at": timezone.now().isoformat(),
            }
            if JobRun.objects.filter(pk=run.pk, status=JobRun.Status.QUEUED).update(result=result):
                current_app.send_task(task, args=[run.pk])
                sent += 1
            continue
        if job_run_give_up(run=run):
            lost += 1
            if run.kind == "erasure":
                erasure_interrupted(run=run, reason="never started")
    return lost, sent


@worker_ready.connect
def _reap_on_worker_start(sender=None, **kwargs):
    # Sent as a task, so this worker's main process is free to answer the inspection.
    current_app.send_task("memory.tasks.jobs_reap", countdown=2)


@shared_task(name="memory.tasks.prune")
def prune(run_id: int | None = None) -> int | None:
    """Delete raw history, job runs, audit events and replays past their retention."""
    return _counted_run(
        prune,
        kind="prune",
        run_id=run_id,
        count=lambda run: retention_prune(),
        lock=GLOBAL_LOCK.format("prune"),
    )


@shared_task(name="memory.tasks.reconcile")
def reconcile(run_id: int | None = None, workspace_id: int | None = None) -> int | None:
    """Merge duplicates, supersede contradictions, queue what people must settle.

    Resumable: a run after a killed worker continues from the last checkpoint."""
    workspace = _workspace(workspace_id)
    return _counted_run(
        reconcile,
        kind="reconcile",
        workspace=workspace,
        run_id=run_id,
        count=lambda run: reconcile_run(run=run),
    )


@shared_task(name="memory.tasks.consolidate")
def consolidate(run_id: int | None = None, workspace_id: int | None = None) -> int | None:
    """Old sessions become summary notes and extracted items; turns marked consolidated."""
    workspace = _workspace(workspace_id)
    return _counted_run(
        consolidate,
        kind="consolidate",
        workspace=workspace,
        run_id=run_id,
        count=lambda run: consolidate_run(run=run),
    )


@shared_task(name="memory.tasks.webhook_deliver")
def webhook_deliver(delivery_id: int, number: int = 1, first: int = 1) -> str:
    """One attempt of a webhook delivery; it queues the next one itself (backoff)."""
    return delivery_attempt(delivery_id=delivery_id, number=number, first=first)


@shared_task(name="memory.tasks.text_stats_fold")
def text_stats_fold() -> dict:
    """Fold full-text statistics' deltas into their counts (memory/knowledge/text_stats.py).

    Housekeeping with no JobRun: recall reads the counts exactly with or without it,
    and it runs every minute, which would fill the job list with nothing."""
    from memory.knowledge.text_stats import fold

    return fold()
