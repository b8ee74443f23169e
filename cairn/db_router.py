"""Reads on a streaming replica: which reads go there, and when they may not.

With a ``replica`` database configured (``CAIRN_REPLICA=1`` starts an embedded one,
cairn/embedded.py; ``REPLICA_DATABASE_URL`` names an external one), recall (and so
context and the UI's search, which recall through it) and the UI's list pages (their
one pagination helper) read there; every write and every other read uses the
primary. Each of those reads goes through ``read_on_replica``; it decides with
``read_alias()`` at the moment of the read:

- **Read your writes.** It takes the primary's current WAL insert position and waits
  up to ``CAIRN_REPLICA_WAIT_MS`` for the replica to have replayed that far, so
  every transaction committed before the read (the caller's own writes, earlier in
  the same request or before it, among them) is visible on the replica. A replica
  further behind, or a read inside a transaction (its own uncommitted writes are on
  the primary only), reads the primary.
- **A replica that stops answering** (any database error on it, in the check or in
  the read) is marked down for ``CAIRN_REPLICA_RETRY_S`` and the read is run again
  on the primary: no 5xx.

The replica's connection refuses any statement sent outside ``read_on_replica``
(``_guard``), so a new read cannot skip the check. The router
(``DATABASE_ROUTERS``) sends writes and migrations to the primary only.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import DatabaseError, connections
from django.db.backends.signals import connection_created

T = TypeVar("T")

logger = logging.getLogger(__name__)

PRIMARY = "default"
REPLICA = "replica"

_granted: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "cairn_replica_granted", default=False
)
_down_until = 0.0


def replica_configured() -> bool:
    return REPLICA in connections.settings


def _mark_down(exc: Exception) -> None:
    global _down_until
    _down_until = time.monotonic() + float(settings.CAIRN_REPLICA_RETRY_S)
    logger.warning("read replica unavailable (%s); reading the primary", exc)
    with contextlib.suppress(Exception):
        connections[REPLICA].close()


def read_alias() -> str:
    """Where a read may run now (see the module docstring)."""
    if not replica_configured() or time.monotonic() < _down_until:
        return PRIMARY
    if connections[PRIMARY].in_atomic_block:
        return PRIMARY
    with connections[PRIMARY].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_insert_lsn()::text")
        lsn = cursor.fetchone()[0]
    deadline = time.monotonic() + float(settings.CAIRN_REPLICA_WAIT_MS) / 1000
    token = _granted.set(True)
    try:
        with connections[REPLICA].cursor() as cursor:
            while True:
                cursor.execute(
                    "SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)", [lsn]
                )
                if cursor.fetchone()[0]:
                    return REPLICA
                if time.monotonic() >= deadline:
                    return PRIMARY
                time.sleep(0.002)
    except DatabaseError as exc:
        _mark_down(exc)
        return PRIMARY
    finally:
        _granted.reset(token)


def read_on_replica(read: Callable[[str], T]) -> T:
    """``read(alias)`` on the replica when ``read_alias()`` allows, else on the
    primary; run again on the primary if the replica fails during it. ``read`` must
    only read (it may run twice)."""
    alias = read_alias()
    if alias == PRIMARY:
        return read(PRIMARY)
    token = _granted.set(True)
    try:
        return read(REPLICA)
    except DatabaseError as exc:
        _mark_down(exc)
    finally:
        _granted.reset(token)
    return read(PRIMARY)


class ReplicaOutsideCheck(RuntimeError):
    """A statement reached the replica without going through ``read_on_replica``."""


def _guard(execute, sql, params, many, context):
    if not _granted.get():
        raise ReplicaOutsideCheck(
            "reads on the replica go through cairn.db_router.read_on_replica: " + sql[:80]
        )
    return execute(sql, params, many, context)


def _install_guard(sender, connection, **kwargs):
    if connection.alias == REPLICA and _guard not in connection.execute_wrappers:
        connection.execute_wrappers.append(_guard)


connection_created.connect(_install_guard, dispatch_uid="cairn-replica-guard")


class ReplicaRouter:
    """Writes and migrations on the primary; reads where their caller chose."""

    def db_for_read(self, model, **hints):
        return None

    def db_for_write(self, model, **hints):
        return PRIMARY

    def allow_relation(self, obj1, obj2, **hints):
        return True

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db == PRIMARY
