"""Run a background job now, in this process: ``manage.py run_job KIND [--workspace W]``.

The same kinds as ``POST /api/v1/jobs/`` and the Job runs page. The run is
recorded as a ``JobRun`` (advisory-locked like any other run), its counts are
printed. ``--queue`` sends it to the workers instead.
"""

from __future__ import annotations

import json

from celery import current_app
from django.core.management.base import BaseCommand, CommandError

import memory.tasks  # noqa: F401  (registers the tasks with the Celery app)
from memory.core.actors import Actor
from memory.maintenance.runnow import RUNNABLE_JOBS, job_run_now
from memory.models import JobRun, Workspace


class Command(BaseCommand):
    help = "Run a background job now (reconcile, consolidate, decay, maintenance, ...)."

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=sorted(RUNNABLE_JOBS), help="the job to run now")
        parser.add_argument("--workspace", help="workspace name (workspace jobs: default all)")
        parser.add_argument(
            "--queue", action="store_true", help="send it to the workers instead of running here"
        )

    def handle(self, *args, kind: str, workspace: str | None, queue: bool, **options):
        job = RUNNABLE_JOBS[kind]
        ws = None
        if workspace:
            ws = Workspace.objects.filter(name=workspace).first()
            if ws is None:
                raise CommandError(f"No workspace named {workspace!r}.")
        if queue:
            if ws is None:
                raise CommandError("--queue needs --workspace (the run is recorded there).")
            run, created = job_run_now(kind=kind, workspace=ws, actor=Actor.system("run_job"))
            self.stdout.write(f"{'queued' if created else 'already queued'}: job run {run.pk}")
            return
        run = JobRun.objects.create(
            kind=kind, workspace=ws, params={"requested": "run_job"}, requested_by="cli:run_job"
        )
        task = current_app.tasks[job.task]
        task(run.pk, ws.pk if ws else None) if job.per_workspace else task(run.pk)
        run.refresh_from_db()
        self.stdout.write(
            f"job run {run.pk} {run.status}: {json.dumps(run.counts, sort_keys=True)}"
        )
        if run.status == JobRun.Status.FAILED:
            raise CommandError(run.error[-500:])
