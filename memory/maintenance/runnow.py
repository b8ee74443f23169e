"""Run a background job now: the API's ``POST /api/v1/jobs/``, the Job runs page's
"Run now" buttons and ``manage.py run_job`` all call :func:`job_run_now`.

Workspace jobs run for the asker's workspace only. Jobs over every workspace
(decay, maintenance, prune, embed backfill) are functions of time and state,
safe to run at any moment, and take the same lock as their beat runs; the run
is recorded in the asker's workspace so they see it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.core.audit import audit_record
from memory.core.jobs import job_enqueue, job_run_give_up, job_run_lost
from memory.core.locks import advisory_xact_lock
from memory.models import JobRun, Workspace


@dataclass(frozen=True)
class RunnableJob:
    kind: str
    task: str
    per_workspace: bool  # the task takes the workspace id after the run id
    label: str


RUNNABLE_JOBS = {
    job.kind: job
    for job in (
        RunnableJob("reconcile", "memory.tasks.reconcile", True, "Reconcile duplicates"),
        RunnableJob("consolidate", "memory.tasks.consolidate", True, "Consolidate sessions"),
        RunnableJob("decay", "memory.tasks.decay", False, "Decay"),
        RunnableJob("maintenance", "memory.tasks.maintenance", False, "Lesson caps"),
        RunnableJob("prune", "memory.tasks.prune", False, "Prune raw history"),
        RunnableJob("embed_backfill", "memory.tasks.embed_backfill", False, "Embed backfill"),
        RunnableJob("skills.budget", "memory.tasks.skills_budget", True, "Skill budget"),
        RunnableJob("skills.consolidate", "memory.tasks.skills_consolidate", True, "Skill deltas"),
    )
}


@transaction.atomic
def job_run_now(*, kind: str, workspace: Workspace, actor: Actor) -> tuple[JobRun, bool]:
    """Queue ``kind`` now; returns (run, created).

    1. Refuse an unknown kind (400 naming ``kind``).
    2. A run of this kind already queued for the workspace is returned instead of a
       second one (a double click queues one run), unless it is lost
       (``job_run_lost``): then it is marked failed and a new run is queued.
    3. Record the run and the audit event; send the task once the transaction commits.
    """
    job = RUNNABLE_JOBS.get(str(kind))
    if job is None:
        raise ApplicationError(
            f"kind must be one of {', '.join(sorted(RUNNABLE_JOBS))}.",
            fields={"kind": ["unknown job kind"]},
            status_code=400,
        )
    # Concurrent requests take turns here, so the second finds the first's queued run
    # (there is no row to lock before the first one exists).
    advisory_xact_lock(f"job_run_now:{workspace.pk}:{job.kind}")
    queued = (
        JobRun.objects.select_for_update()
        .filter(kind=job.kind, workspace=workspace, status=JobRun.Status.QUEUED)
        .order_by("pk")
        .first()
    )
    if queued is not None and not job_run_lost(queued):
        return queued, False
    if queued is not None:
        job_run_give_up(run=queued)  # never answer with a dead run: fail it, queue anew
    run = JobRun.objects.create(
        kind=job.kind,
        workspace=workspace,
        params={"requested": "run_now"},
        requested_by=actor.label[:200],
    )
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action="job.run_now",
        target_type="job_run",
        target_id=run.pk,
        details={"kind": job.kind},
    )
    if job.per_workspace:
        job_enqueue(job.task, run, workspace.pk)
    else:
        job_enqueue(job.task, run)
    return run, True
