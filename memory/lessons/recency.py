"""Recency from self-reports, gathered per process and written together.

An agent token's outcome (the model's own word) moves nothing but recency on what
it had in play on its own operation: ``last_used_at`` and ``use_count`` (SPEC: a
self_report refreshes recency only). Written one UPDATE per outcome after its
commit, that was a statement and a commit of its own on every such outcome, all
on the same few rows.

An agent token's outcome does not even read what it had in play: it hands a
report (``memory.lessons.self_report.InPlayReport``) to the gatherer, and the
writer reads the rows of every report gathered since in one query a model and
asks each report which of them it marks (the same rules as before: the lesson's
current version, not retired, in the outcome's workspace, on its own operation).

So each process gathers the marks and one thread writes them every
``CAIRN_RECENCY_FLUSH_MS`` milliseconds, one statement per model for every row
marked since: each row's uses are added whole (none skipped), its time is the
latest. The rows are locked in id order, lessons before knowledge items, as a
harness outcome's attribution locks them, so nothing deadlocks with it.

- A normal exit (a gunicorn worker's restart or shutdown) writes what is pending.
  A crash loses at most one interval's marks, never evidence: recency is a hint
  for ranking and decay, like recall's own use marks (which skip locked rows).
- Inside a caller's transaction the marks are written at once, in that
  transaction, so they roll back with it.
- ``CAIRN_RECENCY_FLUSH_MS = 0`` writes each outcome's marks at once, after its
  commit (the test settings, where rows live in a test's transaction).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from datetime import datetime
from typing import Protocol

from django.conf import settings
from django.db import DatabaseError, connection

from memory.models import Knowledge, Lesson

logger = logging.getLogger(__name__)

# Lessons before knowledge items: the order a harness outcome's attribution locks them.
_MODELS = (Lesson, Knowledge)
# Marks kept when the database refuses a write, at most this many rows a model:
# beyond that the oldest are dropped (and logged), so an outage cannot grow memory.
_PENDING_MAX = 50_000

Pending = dict[type, dict[int, tuple[int, datetime]]]


class Report(Protocol):
    """What an outcome had in play, resolved to the rows it marks when written."""

    at: datetime
    wanted: dict[type, set[int]]  # the rows to read for it: {Lesson: ids, Knowledge: ids}

    def marks(self, rows: dict[type, dict]) -> dict[type, set[int]]:
        """The rows it marks, given the rows read ({model: {id: row}}, any workspace)."""


class _Gatherer:
    def __init__(self, *, background: bool = True):
        self.lock = threading.Lock()
        self.writing = threading.Lock()  # one write at a time; exit waits for it
        self.pending: Pending = {}
        self.reports: list[Report] = []
        self.background = background  # False: only recency_flush() writes (tests)
        self.thread: threading.Thread | None = None
        self.wake = threading.Event()

    def add(
        self,
        targets: dict[type, set[int]],
        now: datetime,
        *,
        interval_s: float,
        report: Report | None = None,
    ) -> None:
        with self.lock:
            _merge(self.pending, {m: {i: (1, now) for i in ids} for m, ids in targets.items()})
            if report is not None:
                self.reports.append(report)
            if self.thread is None and self.background:
                self.thread = threading.Thread(
                    target=self._run, args=(interval_s,), name="cairn-recency", daemon=True
                )
                self.thread.start()

    def take(self) -> tuple[Pending, list[Report]]:
        with self.lock:
            batch, self.pending = self.pending, {}
            reports, self.reports = self.reports, []
        return batch, reports

    def put_back(self, batch: Pending, reports: list[Report]) -> None:
        with self.lock:
            _merge(self.pending, batch)
            self.reports[:0] = reports
            if len(self.reports) > _PENDING_MAX:
                del self.reports[: len(self.reports) - _PENDING_MAX]
                logger.warning("recency: in-play reports dropped (database unavailable)")
            for model, rows in self.pending.items():
                if len(rows) > _PENDING_MAX:
                    for key in sorted(rows, key=lambda i: rows[i][1])[: len(rows) - _PENDING_MAX]:
                        del rows[key]
                    logger.warning("recency: %s marks dropped (database unavailable)", model)

    def _run(self, interval_s: float) -> None:
        while True:
            self.wake.wait(interval_s)
            self.wake.clear()
            if not (self.pending or self.reports):
                connection.close()  # idle: hold no database connection
                continue
            try:
                _flush(self)
            except Exception:  # noqa: BLE001 - the thread must live on; the marks wait
                logger.exception("recency: marks not written yet")
                connection.close()  # a fresh connection next time


_gatherer = _Gatherer()


def _reset_after_fork() -> None:
    # A forked child starts empty: its parent writes what it gathered.
    global _gatherer
    _gatherer = _Gatherer()


os.register_at_fork(after_in_child=_reset_after_fork)


def _merge(into: Pending, more: Pending) -> None:
    for model, rows in more.items():
        mine = into.setdefault(model, {})
        for pk, (count, at) in rows.items():
            had = mine.get(pk)
            mine[pk] = (count, at) if had is None else (had[0] + count, max(had[1], at))


def recency_mark(*, targets: dict[type, set[int]], now: datetime) -> None:
    """One use, at ``now``, of each row in ``targets`` ({Lesson: ids, Knowledge: ids})."""
    targets = {m: set(ids) for m, ids in targets.items() if ids}
    if not targets:
        return
    interval_ms = settings.CAIRN_RECENCY_FLUSH_MS
    if interval_ms <= 0 or connection.in_atomic_block:
        _write({m: {i: (1, now) for i in ids} for m, ids in targets.items()})
        return
    _gatherer.add(targets, now, interval_s=interval_ms / 1000)


def recency_report(report: Report) -> None:
    """One use, at ``report.at``, of each row the report marks once its rows are read:
    with other reports, by the writer; at once where ``recency_mark`` writes at once."""
    if not any(report.wanted.values()):
        return
    interval_ms = settings.CAIRN_RECENCY_FLUSH_MS
    if interval_ms <= 0 or connection.in_atomic_block:
        _write(_resolved({}, [report]))
        return
    _gatherer.add({}, report.at, interval_s=interval_ms / 1000, report=report)


def _resolved(batch: Pending, reports: list[Report]) -> Pending:
    """``batch`` with the marks of ``reports``, their rows read in one query a model."""
    if not reports:
        return batch
    wanted: dict[type, set[int]] = {}
    for report in reports:
        for model, ids in report.wanted.items():
            wanted.setdefault(model, set()).update(ids)
    rows = {model: model.objects.in_bulk(sorted(ids)) for model, ids in wanted.items() if ids}
    out: Pending = {m: dict(marks) for m, marks in batch.items()}
    for report in reports:
        marked = report.marks(rows)
        _merge(out, {m: {i: (1, report.at) for i in ids} for m, ids in marked.items() if ids})
    return out


def recency_flush() -> int:
    """Write every pending mark now; returns how many rows were marked. On a database
    error the marks are kept for the next try and the error is raised."""
    return _flush(_gatherer)


def _flush(gatherer: _Gatherer) -> int:
    with gatherer.writing:
        batch, reports = gatherer.take()
        if not (batch or reports):
            return 0
        try:
            return _write(_resolved(batch, reports))
        except DatabaseError:
            gatherer.put_back(batch, reports)
            raise


def _write(batch: Pending) -> int:
    marked = 0
    with connection.cursor() as cursor:
        for model in _MODELS:
            rows = batch.get(model)
            if not rows:
                continue
            ids = sorted(rows)
            table = connection.ops.quote_name(model._meta.db_table)
            cursor.execute(
                f"UPDATE {table} AS t SET last_used_at = GREATEST(t.last_used_at, v.at), "
                "use_count = t.use_count + v.n "
                f"FROM (SELECT id FROM {table} WHERE id = ANY(%s) ORDER BY id "
                "FOR NO KEY UPDATE) AS s, "
                "unnest(%s::bigint[], %s::integer[], %s::timestamptz[]) AS v(id, n, at) "
                "WHERE t.id = s.id AND v.id = s.id",
                [ids, ids, [rows[i][0] for i in ids], [rows[i][1] for i in ids]],
            )
            marked += cursor.rowcount
    return marked


@atexit.register
def _flush_at_exit() -> None:
    if not (_gatherer.pending or _gatherer.reports):
        return
    try:
        recency_flush()
    except Exception:  # noqa: BLE001 - exiting: say what was lost, never hang or raise
        logger.exception("recency: marks pending at exit not written")
