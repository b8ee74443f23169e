"""Celery tasks: thin wrappers that call services and record a JobRun."""

from __future__ import annotations

import os
import socket

from celery import shared_task

from memory.services.jobs import job_recorded


@shared_task(name="memory.tasks.heartbeat")
def heartbeat(run_id: int | None = None) -> int:
    """Prove the broker → worker → database path works; records a JobRun."""
    with job_recorded(kind="heartbeat", run_id=run_id, task_id=heartbeat.request.id or "") as run:
        if run is None:
            return 0
        run.counts = {"ok": 1}
        run.result = {"worker": f"{socket.gethostname()}:{os.getpid()}"}
        return run.pk
