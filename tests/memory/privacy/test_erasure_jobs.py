"""Erasure through the real broker and worker: receipts, progress, concurrent ingestion."""

import threading
import time

import pytest
from django.db import connection

from cairn.errors import ApplicationError
from memory.lessons.outcomes import outcome_record
from memory.models import (
    AuditEvent,
    ErasureReceipt,
    ErasureSelector,
    JobRun,
    Knowledge,
    Outcome,
)
from memory.privacy.erasure import erasure_request, receipt_digest
from tests.factories.identity import WorkspaceFactory, person_actor
from tests.factories.lessons import check, step
from tests.factories.privacy import (
    EVERYTHING,
    bundle,
    disk_sweep,
    new_marker,
    ready_agent,
    redis_sweep,
    rows_of,
    sql_sweep,
    workspace_ready,
)


def _wait_for(predicate, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


def _finished(receipt):
    receipt.refresh_from_db()
    return receipt.status in ("completed", "failed")


@pytest.mark.django_db(transaction=True)
def test_it_erases_in_a_real_worker_and_leaves_a_receipt_without_content(
    celery_worker_process, caplog
):
    workspace = WorkspaceFactory()
    workspace_ready(workspace)
    marker = new_marker()
    agent = ready_agent(workspace, "worker-agent")
    erased = bundle(agent=agent, name="e", marker=marker, marked=EVERYTHING)
    kept = bundle(agent=agent, name="k")
    # Planted on disk too: the cached effective skill's write is in the append-only file.
    assert _wait_for(lambda: any("appendonly" in hit for hit in disk_sweep(marker)), timeout=10)

    receipt = erasure_request(
        workspace=workspace,
        selector=_text(marker),
        confirm=workspace.name,
        actor=person_actor("admin"),
        reason="subject access request 42",
    )
    _wait_for(lambda: _finished(receipt))

    assert receipt.status == "completed", JobRun.objects.get(pk=receipt.job_run_id).error
    run = JobRun.objects.get(pk=receipt.job_run_id)
    assert run.kind == "erasure"
    assert run.status == JobRun.Status.SUCCEEDED
    assert run.progress == 1.0
    assert run.counts == receipt.counts
    assert receipt.counts["memory.Knowledge"] == 2  # the item and the error item
    assert receipt.counts["memory.SkillDelta"] == 1
    # The request turn, and the turn where the person named the fact it set.
    assert receipt.counts["memory.ConversationTurn"] == 2
    assert receipt.counts["memory.ToolCall"] == 1
    assert receipt.remaining == {}
    assert receipt.digest == receipt_digest(receipt)
    # The receipt and everything around it holds only the selector's digest.
    assert receipt.selector["kind"] == "text"
    assert receipt.selector["length"] == len(marker)
    assert marker not in str(receipt.selector)
    assert AuditEvent.objects.filter(action="erasure.complete", target_id=str(receipt.pk)).exists()
    assert sql_sweep(marker) == {}
    # The value waited in a row the job deleted; the message carried the run id only.
    assert redis_sweep(marker) == []
    assert not ErasureSelector.objects.filter(job_run=run).exists()
    # Nor on disk: Valkey's append-only file was rewritten after the cache keys
    # (a rendered effective skill quoting the delta) went; worker logs, export
    # files and the rest of var/ hold nothing either, and neither do our own logs.
    assert receipt.effects["valkey_aof_rewritten"] is True
    assert disk_sweep(marker, extra_text=caplog.text) == []
    for label, pks in rows_of(kept).items():
        assert all(_exists(label, pk) for pk in pks), label
    assert not Knowledge.objects.filter(pk__in=erased.knowledge).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_ingestion_loses_nothing_that_was_not_selected(celery_worker_process):
    workspace = WorkspaceFactory()
    workspace_ready(workspace)
    agent = ready_agent(workspace, "busy")
    for n in range(12):
        bundle(agent=agent, name=f"gone{n}", context="ctx-gone", session=f"sess-gone-{n}")
    written: list[tuple[str, int]] = []
    stop = threading.Event()
    failures: list[BaseException] = []

    def ingest():
        n = 0
        try:
            while not stop.is_set() or n < 10:
                n += 1
                item = Knowledge.objects.create(
                    workspace=workspace, agent=agent, content=f"kept note {n}", context="ctx-kept"
                )
                written.append(("knowledge", item.pk))
                body, _ = outcome_record(
                    agent=agent,
                    outcome_id=f"during-{n}",
                    session_id=f"sess-during-{n}",
                    project_remote="https://github.com/acme/kept.git",
                    context="ctx-kept",
                    approach=[
                        step("pip install", "a.txt", "failed", 1),
                        step("uv", "a.txt", "ok", 2),
                    ],
                    checks=[check(3, 0)],
                    channel="harness",
                )
                written.append(("outcome", body["id"]))
                time.sleep(0.01)
        except BaseException as exc:  # surfaced below
            failures.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=ingest)
    thread.start()
    try:
        time.sleep(0.3)
        receipt = erasure_request(
            workspace=workspace,
            selector=_kind("context", "ctx-gone"),
            confirm=workspace.name,
            actor=person_actor("admin"),
        )
        _wait_for(lambda: _finished(receipt))
    finally:
        stop.set()
        thread.join(timeout=60)
    assert failures == []
    assert receipt.status == "completed"
    assert receipt.counts["memory.Knowledge"] == 12
    assert len(written) > 20
    knowledge = [pk for kind, pk in written if kind == "knowledge"]
    outcomes = [pk for kind, pk in written if kind == "outcome"]
    assert Knowledge.objects.filter(pk__in=knowledge).count() == len(knowledge)
    assert Outcome.objects.filter(pk__in=outcomes).count() == len(outcomes)
    assert not Knowledge.objects.filter(workspace=workspace, context="ctx-gone").exists()
    # Writes really overlapped the job.
    run = JobRun.objects.get(pk=receipt.job_run_id)
    assert Knowledge.objects.filter(
        pk__in=knowledge, created_at__gt=run.started_at, created_at__lt=run.finished_at
    ).exists()


@pytest.mark.django_db
def test_it_refuses_without_the_typed_workspace_name():
    workspace = WorkspaceFactory()
    for confirm in (None, "", "yes", workspace.name.upper()):
        with pytest.raises(ApplicationError) as caught:
            erasure_request(
                workspace=workspace,
                selector=_text("abc"),
                confirm=confirm,
                actor=person_actor("a"),
            )
        assert "confirm" in caught.value.fields
    assert not ErasureReceipt.objects.exists()
    assert not JobRun.objects.filter(kind="erasure").exists()


@pytest.mark.django_db
def test_it_stores_no_content_selector_in_the_run_or_the_audit_log():
    workspace = WorkspaceFactory()
    receipt = erasure_request(
        workspace=workspace,
        selector=_kind("entity", "person:sarah_chen"),
        confirm=workspace.name,
        actor=person_actor("a"),
    )
    run = JobRun.objects.get(pk=receipt.job_run_id)
    event = AuditEvent.objects.get(action="erasure.request")
    for stored in (run.params, receipt.selector, event.details):
        assert "sarah" not in str(stored)
    assert receipt.selector["kind"] == "entity"


def _text(value):
    from memory.privacy.selection import Selector

    return Selector(kind="text", value=value)


def _kind(kind, value):
    from memory.privacy.selection import Selector

    return Selector(kind=kind, value=value)


def _exists(label, pk):
    from django.apps import apps

    return apps.get_model(label).objects.filter(pk=pk).exists()
