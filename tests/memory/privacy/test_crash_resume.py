"""kill -9 of a real Celery worker mid-erasure and mid-export.

A worker killed with SIGKILL acknowledges nothing and records nothing. Its
replacement runs the reaper on start (memory.tasks.jobs_reap), which resumes the
run; the final state must equal one clean run, and the erasure receipt must count
exactly the rows that went.

These tests use their own worker on their own broker db (CAIRN_REDIS_DB=3), so a
session-wide test worker never takes the job they are about to interrupt; the job is
sent there by a second Celery client, the way the service would send it.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from celery import Celery
from django.conf import settings
from django.db import transaction

from memory.models import ConversationTurn, ErasureSelector, JobRun, Knowledge
from memory.privacy.erasure import erasure_request
from memory.privacy.exports import export_request
from memory.privacy.selection import Selector
from tests.factories.identity import WorkspaceFactory, person_actor

BASE = Path(__file__).resolve().parents[3]
DB = "3"


def _broker_url() -> str:
    return settings.REDIS_URL.rsplit("/", 1)[0] + f"/{DB}"


def _start_worker(log_name: str) -> subprocess.Popen:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="cairn.settings_test",
        CAIRN_DATABASE_NAME=settings.DATABASES["default"]["NAME"],
        CAIRN_REDIS_DB=DB,
        CAIRN_ERASURE_BATCH="10",
        CAIRN_EXPORT_CHUNK="5",
        CAIRN_REAPER_GRACE_S="0",
    )
    log = open(BASE / "var" / log_name, "a")
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "cairn", "worker", "--concurrency", "1"]
        + ["--pool", "prefork", "--hostname", f"crash-{time.monotonic_ns()}@%h"]
        + ["--without-mingle", "--without-gossip", "--loglevel", "INFO"],
        cwd=BASE,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: kill -9 takes main and children
    )


def _kill9(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            _kill9(proc)


def _wait(predicate, timeout=120, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _queued_without_sending(request):
    """Run a service that queues a job, and keep its on-commit send for ourselves."""
    with transaction.atomic():
        result = request()
        transaction.get_connection().run_on_commit.clear()
    return result


@pytest.fixture
def client_app():
    # set_as_current=False: the services keep sending through cairn's own app.
    app = Celery("crash-test-client", broker=_broker_url(), set_as_current=False)
    app.conf.broker_transport_options = {"socket_connect_timeout": 2}
    import redis

    redis.Redis.from_url(_broker_url()).flushdb()
    yield app
    redis.Redis.from_url(_broker_url()).flushdb()


def _rows(workspace, context: str, n: int, turns: int = 0) -> None:
    Knowledge.objects.bulk_create(
        Knowledge(workspace=workspace, content=f"Crash row {i} about {context}", context=context)
        for i in range(n)
    )
    ConversationTurn.objects.bulk_create(
        ConversationTurn(
            workspace=workspace,
            session_id=f"sess-{context}",
            role="user",
            turn_index=i,
            content=f"Crash turn {i} about {context}",
            context=context,
        )
        for i in range(turns)
    )


def _table_files_holding(needle: bytes) -> list[str]:
    """Tables whose heap or TOAST files hold ``needle`` (after CHECKPOINT)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
        cursor.execute("SHOW data_directory")
        root = Path(cursor.fetchone()[0])
        cursor.execute(
            "SELECT c.relname, pg_relation_filepath(c.oid), "
            "pg_relation_filepath(NULLIF(c.reltoastrelid, 0)) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname = 'public'"
        )
        rows = cursor.fetchall()
    holding = set()
    for name, *paths in rows:
        for path in filter(None, paths):
            for file in (root / path).parent.glob(Path(path).name + "*"):
                if "_" not in file.name and needle in file.read_bytes():
                    holding.add(name)
    return sorted(holding)


@pytest.mark.django_db(transaction=True)
def test_kill_9_mid_erasure_resumes_and_the_receipt_counts_what_went(client_app):
    workspace = WorkspaceFactory()
    _rows(workspace, "crash-erase", 1200, turns=300)
    _rows(workspace, "crash-keep", 40, turns=10)
    receipt = _queued_without_sending(
        lambda: erasure_request(
            workspace=workspace,
            selector=Selector(kind="context", value="crash-erase"),
            confirm=workspace.name,
            actor=person_actor("admin"),
        )
    )
    run = receipt.job_run
    client_app.send_task("memory.tasks.erasure_run", args=[run.pk])

    worker = _start_worker("test-crash-worker.log")
    try:
        _wait(
            lambda: JobRun.objects.get(pk=run.pk).progress_done >= 100, what="the erasure to start"
        )
        _kill9(worker)
        run.refresh_from_db()
        receipt.refresh_from_db()
        left = Knowledge.objects.filter(workspace=workspace, context="crash-erase").count()
        assert run.status == JobRun.Status.RUNNING  # what the dead worker left behind
        assert 0 < left < 1200, "killed mid-way"
        # Written with each batch: the receipt already says exactly what is gone.
        assert receipt.counts["memory.Knowledge"] == 1200 - left
        assert ErasureSelector.objects.filter(job_run=run).exists()

        worker = _start_worker("test-crash-worker.log")
        _wait(
            lambda: (
                JobRun.objects.get(pk=run.pk).status
                in (JobRun.Status.SUCCEEDED, JobRun.Status.FAILED, JobRun.Status.INTERRUPTED)
            ),
            what="the reaper to resume the erasure",
        )
    finally:
        _stop(worker)
    run.refresh_from_db()
    receipt.refresh_from_db()
    assert run.status == JobRun.Status.SUCCEEDED, run.error
    assert run.result["resumed"] == 1
    assert run.error == ""
    assert receipt.status == "completed"
    # One clean run's final state: every matching row gone, every other row kept,
    # and the receipt counts each deleted row once.
    assert Knowledge.objects.filter(workspace=workspace, context="crash-erase").count() == 0
    assert Knowledge.objects.filter(workspace=workspace, context="crash-keep").count() == 40
    assert receipt.counts == {"memory.ConversationTurn": 300, "memory.Knowledge": 1200}
    assert receipt.preview == {"memory.ConversationTurn": 300, "memory.Knowledge": 1200}
    assert not ErasureSelector.objects.filter(job_run=run).exists()
    # The resumed run rewrote what its killed predecessor deleted from too (the
    # receipt's counts carry over), the conversation turns included: the erased
    # text is in no table file.
    assert ConversationTurn.objects.filter(context="crash-keep").count() == 10
    for table in ("memory_knowledge", "memory_conversationturn"):
        assert table in receipt.effects["rewritten"], receipt.effects
    assert _table_files_holding(b"about crash-erase") == []


@pytest.mark.django_db(transaction=True)
def test_kill_9_mid_export_resumes_and_the_file_equals_a_clean_export(client_app):
    workspace = WorkspaceFactory()
    _rows(workspace, "crash-export", 1500)
    selector = Selector(kind="workspace", value=workspace.name)

    def request():
        return export_request(
            workspace=workspace, selector=selector, fmt="jsonl", actor=person_actor("admin")
        )

    interrupted = _queued_without_sending(request)
    client_app.send_task("memory.tasks.export_run", args=[interrupted.pk])
    worker = _start_worker("test-crash-worker.log")
    try:
        _wait(
            lambda: JobRun.objects.get(pk=interrupted.pk).progress_done >= 50,
            what="the export to start",
        )
        _kill9(worker)
        assert JobRun.objects.get(pk=interrupted.pk).status == JobRun.Status.RUNNING
        worker = _start_worker("test-crash-worker.log")
        _wait(
            lambda: (
                JobRun.objects.get(pk=interrupted.pk).status
                in (JobRun.Status.SUCCEEDED, JobRun.Status.FAILED, JobRun.Status.INTERRUPTED)
            ),
            what="the reaper to resume the export",
        )
        clean = _queued_without_sending(request)
        client_app.send_task("memory.tasks.export_run", args=[clean.pk])
        _wait(
            lambda: JobRun.objects.get(pk=clean.pk).status == JobRun.Status.SUCCEEDED,
            what="a clean export",
        )
    finally:
        _stop(worker)
    interrupted.refresh_from_db()
    clean.refresh_from_db()
    assert interrupted.status == JobRun.Status.SUCCEEDED, interrupted.error
    assert interrupted.result["resumed"] == 1
    assert interrupted.counts == clean.counts
    assert interrupted.result["records"] == clean.result["records"]
    media = Path(settings.MEDIA_ROOT)
    first = (media / interrupted.result["file"]).read_text().splitlines()
    second = (media / clean.result["file"]).read_text().splitlines()
    # Same records in the same order; only the header line names its own run (and so
    # the signature line over it differs too).
    assert first[1:-1] == second[1:-1]
    assert json.loads(first[-1])["type"] == json.loads(second[-1])["type"] == "signature"
    assert not list((media / interrupted.result["file"]).parent.glob("*.part"))
