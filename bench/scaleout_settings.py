"""Settings for the scale-out run's processes: production's, plus a flight recorder.

``DJANGO_SETTINGS_MODULE=scaleout_settings`` (with ``bench/`` on the path) serves and
works exactly as ``cairn.settings``; when ``CAIRN_SCALEOUT_EVENTS`` names a file,
every process (web, worker, beat) also appends one JSON line per event to it:

- ``publish``: a task message sent (by whom: ``CAIRN_SCALEOUT_ROLE``), with its id;
- ``prerun`` / ``postrun``: a worker starting and finishing a task;
- ``lock`` / ``locked``: a session advisory lock (``memory.core.locks``) taken, and the
  interval it was held. ``t0`` is read after Postgres granted it and ``t1`` before it
  is given back, so a recorded interval lies inside the real one: two recorded
  intervals of one name that overlap are two real holders at once.

Recording only; nothing behaves differently. Not a benchmark itself (no ``bench_``
prefix), so ``run_all.py`` does not run it.
"""

import contextlib
import json
import os
import time

from celery import signals

import memory.core.locks as _locks
from cairn.settings import *  # noqa: F403

_EVENTS = os.environ.get("CAIRN_SCALEOUT_EVENTS", "")
_ROLE = os.environ.get("CAIRN_SCALEOUT_ROLE", "")


def _emit(**event) -> None:
    if not _EVENTS:
        return
    event.update(pid=os.getpid(), role=_ROLE)
    line = (json.dumps(event) + "\n").encode()
    # One write(2) per line on an O_APPEND file: lines from many processes never interleave.
    fd = os.open(_EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _recorded(inner, blocking: bool):
    @contextlib.contextmanager
    def advisory(name: str):
        with inner(name) as acquired:
            held = blocking or bool(acquired)
            t0 = time.time()
            if held:
                _emit(ev="lock", name=name, t0=t0)
            try:
                yield acquired
            finally:
                if held:
                    _emit(ev="locked", name=name, t0=t0, t1=time.time())

    return advisory


# Before any module imports them by name (memory.core.jobs, memory.maintenance.reconcile).
_locks.advisory_lock = _recorded(_locks.advisory_lock, blocking=False)
_locks.advisory_lock_blocking = _recorded(_locks.advisory_lock_blocking, blocking=True)


@signals.before_task_publish.connect(weak=False)
def _published(sender=None, headers=None, body=None, **kwargs):
    args = (body or [[]])[0] if isinstance(body, (list, tuple)) else []
    _emit(
        ev="publish", task=sender, id=(headers or {}).get("id"), args=list(args)[:2], t=time.time()
    )


@signals.task_prerun.connect(weak=False)
def _started(task_id=None, task=None, **kwargs):
    _emit(ev="prerun", task=getattr(task, "name", ""), id=task_id, t=time.time())


@signals.task_postrun.connect(weak=False)
def _finished(task_id=None, task=None, state=None, **kwargs):
    _emit(ev="postrun", task=getattr(task, "name", ""), id=task_id, state=state, t=time.time())
