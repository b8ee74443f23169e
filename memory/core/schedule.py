"""When each periodic job runs next: Celery beat's schedule (``CELERY_BEAT_SCHEDULE``,
declared in ``cairn/tuning.py``) read against the job runs beat started.

Beat keeps its own clock in a file the web process does not read; a run it started
is recorded as a system run nobody requested (``requested_by`` empty, no workspace),
created when a worker picks it up. The next run is that moment plus the interval:
an estimate to the minute, which is what a person deciding whether to press "Run
now" needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from memory.models import JobRun

# Beat tasks whose job-run kind is not the task's last name.
TASK_KINDS = {
    "memory.tasks.skills_budget": "skills.budget",
    "memory.tasks.skills_consolidate": "skills.consolidate",
}
# Housekeeping tasks that record no job run (each says why in its docstring): the
# schedule shows their interval only.
UNRECORDED_TASKS = {"memory.tasks.text_stats_fold", "memory.tasks.jobs_reap"}


@dataclass(frozen=True)
class ScheduledJob:
    name: str  # the beat entry
    task: str
    kind: str  # the job-run kind it records ("" when it records none)
    every: timedelta | None  # None: not a fixed interval (a crontab)
    last: datetime | None  # the newest run beat started
    next: datetime | None  # estimated; None when it cannot be told

    @property
    def overdue(self) -> bool:
        """Due more than one interval ago: beat is probably not running."""
        if self.next is None or self.every is None:
            return False
        return self.next + self.every < timezone.now()


def task_kind(task: str) -> str:
    if task in UNRECORDED_TASKS:
        return ""
    return TASK_KINDS.get(task, task.rsplit(".", 1)[-1])


def _interval(schedule) -> timedelta | None:
    if isinstance(schedule, int | float):
        return timedelta(seconds=schedule)
    if isinstance(schedule, timedelta):
        return schedule
    run_every = getattr(schedule, "run_every", None)  # celery.schedules.schedule
    return run_every if isinstance(run_every, timedelta) else None


def job_schedule(*, now: datetime | None = None) -> list[ScheduledJob]:
    """Every beat entry with its interval, last scheduled run and next run, soonest first.

    One query: the newest beat-started run per kind."""
    now = now or timezone.now()
    entries = getattr(settings, "CELERY_BEAT_SCHEDULE", {}) or {}
    kinds = {name: task_kind(entry["task"]) for name, entry in entries.items()}
    last_by_kind = dict(
        JobRun.objects.filter(
            workspace__isnull=True, requested_by="", kind__in=[k for k in kinds.values() if k]
        )
        .order_by()
        .values("kind")
        .annotate(last=Max("created_at"))
        .values_list("kind", "last")
    )
    jobs = []
    for name, entry in entries.items():
        kind = kinds[name]
        every = _interval(entry["schedule"])
        last = last_by_kind.get(kind)
        if every is not None:
            nxt = last + every if last else None
        elif hasattr(entry["schedule"], "remaining_estimate"):  # a crontab
            nxt = now + entry["schedule"].remaining_estimate(last or now)
        else:
            nxt = None
        jobs.append(
            ScheduledJob(name=name, task=entry["task"], kind=kind, every=every, last=last, next=nxt)
        )
    far = now + timedelta(days=3650)
    return sorted(jobs, key=lambda j: (j.next or far, j.every or timedelta(0), j.name))
