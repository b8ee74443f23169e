"""Resumable job runs: a cursor saved after every committed step.

A worker killed mid-run leaves its ``JobRun`` as ``running`` with the cursor of
the last step it committed. The next run of the same kind and workspace (which
holds the advisory lock, so that run is dead) marks it interrupted and starts
from its cursor. Every step is idempotent on its own, so a resumed run and one
clean run end in the same state.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.utils import timezone

from memory.models import JobRun


def run_resume_cursor(*, run: JobRun) -> dict | None:
    """The cursor of an interrupted run this one continues (marking that run failed)."""
    earlier = JobRun.objects.filter(
        kind=run.kind, workspace_id=run.workspace_id, pk__lt=run.pk
    ).order_by("-pk")
    last = earlier.exclude(status__in=[JobRun.Status.QUEUED, JobRun.Status.SKIPPED]).first()
    if last is None or last.status not in (JobRun.Status.RUNNING, JobRun.Status.FAILED):
        return None
    cursor = (last.result or {}).get("cursor")
    if last.status == JobRun.Status.RUNNING:
        JobRun.objects.filter(pk=last.pk).update(
            status=JobRun.Status.FAILED,
            finished_at=timezone.now(),
            error=f"Interrupted (the worker stopped); run {run.pk} resumed from its cursor.",
        )
    if cursor:
        run.result = {**(run.result or {}), "resumed_from": last.pk}
    return cursor or None


def run_checkpoint(*, run: JobRun, cursor: dict | None, counts: dict, done: int) -> None:
    """Save the cursor, counts and progress after a committed step (then pause in tests)."""
    run.result = {**(run.result or {}), "cursor": cursor}
    run.counts = dict(counts)
    run.progress_done = done
    JobRun.objects.filter(pk=run.pk).update(
        result=run.result, counts=run.counts, progress_done=done
    )
    if settings.CAIRN_MAINTENANCE_STEP_DELAY_S:
        time.sleep(settings.CAIRN_MAINTENANCE_STEP_DELAY_S)


def run_total(*, run: JobRun, total: int) -> None:
    run.progress_total = total
    JobRun.objects.filter(pk=run.pk).update(progress_total=total)
