"""Job runs: every background job records start, end, counts, progress and errors.

Jobs take a Postgres advisory lock named after their kind (and workspace), so
two runs at once do not double-apply: the second records itself as skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import traceback

from django.db import connection, transaction
from django.utils import timezone

from memory.models import JobRun


def _lock_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def advisory_lock(name: str):
    """Session-level advisory lock; yields True if acquired, False if held elsewhere."""
    key = _lock_key(name)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        acquired = cursor.fetchone()[0]
    try:
        yield acquired
    finally:
        if acquired:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


@contextlib.contextmanager
def advisory_lock_blocking(name: str):
    """Session-level advisory lock that waits for its turn."""
    key = _lock_key(name)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [key])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


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

    1. Claim the queued run (or create one) and mark it running.
    2. Take the advisory lock; if another run holds it, record ``skipped``.
    3. Yield the run (``run.counts`` is filled in by the body); record success
       or the error with its traceback, and re-raise errors.
    """
    if run_id is not None:
        run = JobRun.objects.get(pk=run_id)
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


def job_enqueue(
    *, task, kind: str, workspace=None, params: dict | None = None, requested_by: str = ""
) -> JobRun:
    """Create a queued JobRun and send ``task(run_id)`` once the transaction commits."""
    run = job_run_create(kind=kind, workspace=workspace, params=params, requested_by=requested_by)
    transaction.on_commit(lambda: task.delay(run.pk))
    return run
