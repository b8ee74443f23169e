"""Erasure finds every copy: audit reasons (an agent's retire reason, a reviewer's
approve reason), the receipt's own reason, the table files and the write-ahead log.

The sweep reads PostgreSQL's own files: after CHECKPOINT (dirty pages reach the
files), every table's heap and TOAST files (found with pg_relation_filepath), and
every WAL segment left in pg_wal.
"""

import time
from pathlib import Path

import pytest
from django.db import connection

from memory.core.actors import Actor
from memory.core.audit import REASON_ERASED
from memory.lessons.lifecycle import lesson_retire
from memory.models import AuditEvent, ErasureReceipt, JobRun
from memory.privacy.erasure import erasure_request
from memory.privacy.selection import Selector
from memory.skills.consent import delta_confirm_quarantined
from tests.factories.identity import WorkspaceFactory, person_actor
from tests.factories.lessons import LessonFactory
from tests.factories.privacy import (
    EVERYTHING,
    bundle,
    new_marker,
    ready_agent,
    sql_sweep,
    workspace_ready,
)
from tests.factories.skills import OBSERVED_CONTENT, propose, reviewer


def _wait_for(predicate, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


def _files(cursor) -> tuple[dict[Path, str], list[Path]]:
    """({heap or TOAST file: its table} for every table of this database, WAL segments)."""
    cursor.execute("CHECKPOINT")
    cursor.execute("SHOW data_directory")
    root = Path(cursor.fetchone()[0])
    cursor.execute(
        "SELECT c.relname, pg_relation_filepath(c.oid), "
        "pg_relation_filepath(NULLIF(c.reltoastrelid, 0)) "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind IN ('r', 'm') AND n.nspname = 'public'"
    )
    heap = {}
    for name, *paths in cursor.fetchall():
        for path in filter(None, paths):
            for file in (root / path).parent.glob(Path(path).name + "*"):
                if "_" not in file.name:  # not the free-space or visibility maps
                    heap[file] = name
    wal = sorted(p for p in (root / "pg_wal").iterdir() if p.is_file() and len(p.name) == 24)
    assert heap and wal
    return heap, wal


def _holding(paths, needle: bytes) -> list[str]:
    named = paths if isinstance(paths, dict) else {p: p.name for p in paths}
    return sorted({named[p] for p in named if needle in p.read_bytes()})


@pytest.mark.django_db(transaction=True)
def test_erasure_leaves_the_text_in_no_reason_no_table_file_and_no_wal(celery_worker_process):
    workspace = WorkspaceFactory()
    workspace_ready(workspace)
    marker = new_marker()
    agent = ready_agent(workspace, "sweep")
    erased = bundle(agent=agent, name="e", marker=marker, marked=EVERYTHING)
    bundle(agent=agent, name="k")
    # Reasons that quote the text about rows that hold none of it (kept rows).
    kept_lesson = LessonFactory(workspace=workspace)
    lesson_retire(
        lesson=kept_lesson,
        actor=Actor.for_agent(agent),
        reason=f"the user said {marker} is wrong",
    )
    kept_delta = propose(agent, "Keep replies short.", provenance=OBSERVED_CONTENT)
    person = Actor.for_user(reviewer(workspace))

    delta_confirm_quarantined(delta=kept_delta, actor=person, reason=f"ok per {marker}")
    with connection.cursor() as cursor:
        heap, wal = _files(cursor)
    assert _holding(heap, marker.encode()), "the text was planted in the table files"

    receipt = erasure_request(
        workspace=workspace,
        selector=Selector(kind="text", value=marker),
        confirm=workspace.name,
        actor=person_actor("admin"),
        reason=f"subject asked us to forget {marker}",
    )
    _wait_for(lambda: ErasureReceipt.objects.get(pk=receipt.pk).status in ("completed", "failed"))
    receipt.refresh_from_db()
    assert receipt.status == "completed", JobRun.objects.get(pk=receipt.job_run_id).error
    assert receipt.reason == REASON_ERASED
    assert receipt.effects["reasons_redacted"] >= 3
    # Rewritten: every table rows went from, and the two whose reasons were redacted.
    for table in ("conversationturn", "knowledge", "skilldelta", "auditevent", "erasurereceipt"):
        assert f"memory_{table}" in receipt.effects["rewritten"], table
    assert receipt.effects["vacuum_skipped_busy"] == receipt.effects["rewrite_skipped_busy"] == []
    assert receipt.effects["wal_switched"] is True
    reasons = dict(AuditEvent.objects.filter(workspace=workspace).values_list("action", "reason"))
    assert reasons["lesson.retire"] == REASON_ERASED  # the agent's retire reason
    assert reasons["delta.confirm_quarantined"] == REASON_ERASED  # the reviewer's reason
    assert reasons["erasure.request"] == REASON_ERASED
    assert sql_sweep(marker) == {}
    assert erased.deltas and kept_delta.pk

    with connection.cursor() as cursor:
        heap, wal = _files(cursor)
    assert _holding(heap, marker.encode()) == [], _holding(heap, marker.encode())
    assert _holding(wal, marker.encode()) == []
