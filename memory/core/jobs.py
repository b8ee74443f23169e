"""Job runs: every background job records start, end, counts, progress and errors.

Jobs take a Postgres advisory lock named after their kind (and workspace), so
two runs at once do not double-apply: the second records itself as skipped.
"""

from __future__ import annotations

import contextlib
import traceback
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from cairn.errors import ApplicationError
from memory.core.locks import advisory_lock
from memory.models import JobRun


def job_run_create(
    *, kind: str, workspace=None, params: dict | None = None, requested_by: str = ""
) -> JobRun:
    return JobRun.objects.create(
        kind=kind, workspace=workspace, params=params or {}, requested_by=requested_by
    )


def job_progress(*, run: JobRun, done: int, total: int | None = None) -> None:
    fields = {"progress_done": done}
    if total is not None:
        fields["progress_total"] = total
    JobRun.objects.filter(pk=run.pk).update(**fields)
    run.progress_done = done
    if total is not None:
        run.progress_total = total


@contextlib.contextmanager
def job_recorded(
    *,
    kind: str,
    workspace=None,
    run_id: int | None = None,
    task_id: str = "",
    lock: str | None = None,
):
    """Run a job body inside a JobRun record.

    1. Claim the queued run (or create one) and mark it running; a run that has
       already finished (given up on as lost) is not run again.
    2. Take the advisory lock; if another run holds it, record ``skipped``.
    3. Yield the run (``run.counts`` is filled in by the body); record success
       or the error (an ``ApplicationError``'s own message, else the traceback),
       and re-raise errors.
    """
    if run_id is not None:
        run = JobRun.objects.get(pk=run_id)
        if run.status in FINISHED:
            # A message that arrives after its run was given up on (``job_run_lost``):
            # the run already says it failed and a newer one does the work.
            yield None
            return
    else:
        run = JobRun.objects.create(kind=kind, workspace=workspace)
    run.status = JobRun.Status.RUNNING
    run.started_at = timezone.now()
    run.task_id = task_id or run.task_id
    run.save(update_fields=["status", "started_at", "task_id"])
    lock_name = lock or f"job:{kind}:{workspace.pk if workspace else run.workspace_id or '*'}"
    with advisory_lock(lock_name) as acquired:
        if not acquired:
            run.status = JobRun.Status.SKIPPED
            run.finished_at = timezone.now()
            run.error = "Another run of this job held the lock."
            run.save(update_fields=["status", "finished_at", "error"])
            yield None
            return
        try:
            yield run
        except ApplicationError as exc:
            # A failure the job explains itself: its sentence, not a traceback with
            # the server's paths (the worker log keeps the traceback).
            run.status = JobRun.Status.FAILED
            run.error = exc.message[:4000]
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "error", "finished_at", "counts", "result"])
            raise
        except Exception:
            run.status = JobRun.Status.FAILED
            run.error = traceback.format_exc()[-4000:]
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "error", "finished_at", "counts", "result"])
            raise
        run.status = JobRun.Status.SUCCEEDED
        run.finished_at = timezone.now()
        if run.progress_total:
            run.progress_done = run.progress_total
        run.save(update_fields=["status", "finished_at", "counts", "result", "progress_done"])


FINISHED = (
    JobRun.Status.SUCCEEDED,
    JobRun.Status.FAILED,
    JobRun.Status.SKIPPED,
    JobRun.Status.INTERRUPTED,
)
LOST = (
    "Never started: no worker picked it up within {bound} s, so its queued message was "
    "lost (the broker or the database stopped). Run it again; the next scheduled run "
    "also does this work."
)


def job_queued_since(run: JobRun):
    """When ``run`` was last put in the queue: at creation, or when the reaper sent
    it again (``result["queued_at"]``)."""
    again = (run.result or {}).get("queued_at")
    return parse_datetime(again) if again else run.created_at


def job_run_lost(run: JobRun, *, now=None) -> bool:
    """The one rule for a dead queued run: still ``queued`` more than
    CAIRN_REAPER_QUEUED_S after it was queued (no worker claimed it: a claimed run is
    ``running`` at once). Its message is taken as gone."""
    if run.status != JobRun.Status.QUEUED:
        return False
    bound = timedelta(seconds=settings.CAIRN_REAPER_QUEUED_S)
    return job_queued_since(run) < (now or timezone.now()) - bound


def job_run_give_up(*, run: JobRun) -> bool:
    """Mark a lost queued run failed (only if it is still queued); True if it was."""
    return bool(
        JobRun.objects.filter(pk=run.pk, status=JobRun.Status.QUEUED).update(
            status=JobRun.Status.FAILED,
            finished_at=timezone.now(),
            error=LOST.format(bound=settings.CAIRN_REAPER_QUEUED_S),
        )
    )


def job_run_fail(*, run: JobRun, error: str) -> None:
    JobRun.objects.filter(pk=run.pk).update(
        status=JobRun.Status.FAILED, error=error[:4000], finished_at=timezone.now()
    )
    run.status = JobRun.Status.FAILED
    run.error = error[:4000]


def job_enqueue(task_name: str, run: JobRun, *args, on_refused=None) -> None:
    """Send the task ``task_name(run.pk, *args)`` once the current transaction commits.

    By name, so services never import ``memory.tasks`` (which sits above every
    domain and imports their services). When the broker refuses (down, or not
    answering within the short publish timeouts in settings), the run is marked
    failed at once (and ``on_refused`` marks what else waits on it), then the
    broker's error propagates: the API maps it to a 503 with Retry-After, so
    nothing stays ``queued`` forever."""

    def send():
        try:
            current_app.send_task(task_name, args=[run.pk, *args])
        except Exception as exc:
            job_run_fail(run=run, error=f"Not started: the job queue (broker) refused it: {exc}")
            if on_refused is not None:
                on_refused()
            raise

    transaction.on_commit(send)
