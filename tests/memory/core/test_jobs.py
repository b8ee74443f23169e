"""A real job end to end: broker → worker process → database → JobRun."""

import time

import pytest

from memory.core.jobs import job_recorded
from memory.core.locks import advisory_lock
from memory.models import JobRun
from memory.tasks import heartbeat


def _wait_for(predicate, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


@pytest.mark.django_db(transaction=True)
def test_heartbeat_runs_on_a_real_worker(celery_worker_process):
    result = heartbeat.delay()
    run_id = result.get(timeout=30)
    run = JobRun.objects.get(pk=run_id)
    assert run.kind == "heartbeat"
    assert run.status == JobRun.Status.SUCCEEDED
    assert run.counts == {"ok": 1}
    assert run.started_at <= run.finished_at
    # It ran in the worker process, not here.
    import os

    assert not run.result["worker"].endswith(f":{os.getpid()}")


@pytest.mark.django_db(transaction=True)
def test_a_queued_run_is_claimed_by_the_worker(celery_worker_process):
    run = JobRun.objects.create(kind="heartbeat")
    heartbeat.delay(run.pk)
    _wait_for(lambda: JobRun.objects.get(pk=run.pk).status == JobRun.Status.SUCCEEDED)
    assert JobRun.objects.filter(kind="heartbeat").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_second_concurrent_run_is_skipped_not_doubled():
    with advisory_lock("job:heartbeat:*") as held:
        assert held
        # Another connection tries the same job while the lock is held.
        import threading

        from django.db import connection

        outcome = {}

        def other():
            with job_recorded(kind="heartbeat") as run:
                outcome["run"] = run
            connection.close()

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert outcome["run"] is None
    skipped = JobRun.objects.get(kind="heartbeat")
    assert skipped.status == JobRun.Status.SKIPPED


@pytest.mark.django_db
def test_a_failing_job_records_its_error():
    with pytest.raises(ValueError):
        with job_recorded(kind="boom") as run:
            run.counts = {"seen": 3}
            raise ValueError("broken input")
    run = JobRun.objects.get(kind="boom")
    assert run.status == JobRun.Status.FAILED
    assert "broken input" in run.error
    assert run.counts == {"seen": 3}


@pytest.mark.django_db(transaction=True)
def test_a_worker_sends_one_heartbeat_when_it_starts(tmp_path):
    """No one calls heartbeat.delay(): the worker_ready signal does, so Job runs
    is not empty for the first beat interval after `make run`."""
    import os
    import subprocess
    import sys

    from django.conf import settings

    from tests.conftest import BASE_DIR, _worker_env

    assert not JobRun.objects.filter(kind="heartbeat").exists()
    env = {**_worker_env(settings.DATABASES["default"]["NAME"]), "CAIRN_HEARTBEAT_ON_START": "1"}
    log = open(tmp_path / "worker.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "cairn", "worker", "--loglevel", "INFO"]
        + ["--concurrency", "1", "--pool", "solo", "--without-mingle", "--without-gossip"]
        + ["--hostname", f"startbeat-{os.getpid()}@%h"],
        cwd=BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        run = _wait_for(
            lambda: JobRun.objects.filter(kind="heartbeat", status="succeeded").first(),
            timeout=60,
        )
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
    assert run.workspace_id is None and run.counts == {"ok": 1}
    assert JobRun.objects.filter(kind="heartbeat").count() == 1  # once, not per process
