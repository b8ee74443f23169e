"""PostgreSQL advisory locks, named by text: one holder at a time."""

from __future__ import annotations

import contextlib
import hashlib

from django.db import connection


def _lock_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def advisory_lock(name: str):
    """Session-level advisory lock; yields True if acquired, False if held elsewhere."""
    key = _lock_key(name)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        acquired = cursor.fetchone()[0]
    try:
        yield acquired
    finally:
        if acquired:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


@contextlib.contextmanager
def advisory_lock_blocking(name: str):
    """Session-level advisory lock that waits for its turn."""
    key = _lock_key(name)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [key])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


def advisory_xact_lock(name: str) -> None:
    """Wait for the transaction-scoped advisory lock ``name``; released at commit or
    rollback. For a check-then-insert under a uniqueness rule whose row may not exist
    yet (nothing to ``SELECT ... FOR UPDATE``): concurrent writers take turns instead
    of one of them hitting the unique index."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_key(name)])


def advisory_xact_locks(names) -> None:
    """:func:`advisory_xact_lock` for many names in one statement, in key order (two
    transactions locking overlapping sets in different orders would deadlock)."""
    keys = sorted({_lock_key(name) for name in names})
    if keys:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_advisory_xact_lock(k)) FROM unnest(%s::bigint[]) AS k", [keys]
            )
