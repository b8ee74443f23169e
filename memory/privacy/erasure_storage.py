"""Leaving no copy on disk: after an erasure the tables it touched are vacuumed (those
it deleted from rewritten, so no erased bytes stay in their files) and the WAL is
switched (docs/operating/hardening.md says what holds and what a deployment keeps)."""

from __future__ import annotations

from collections.abc import Iterable

from django.apps import apps
from django.conf import settings
from django.db import connection

from memory.privacy.datamap import erasable_tables, followers_of, trigger_tables

# Tables whose rows hold people's words about erased rows without being erased
# themselves: their old row versions are vacuumed too.
REDACTED_TABLES = ("memory.AuditEvent", "memory.ErasureReceipt")


def erasure_touched_tables() -> list[str]:
    """Every table an erasure deletes from, rebuilds, or redacts words in."""
    labels = {table.label for table in erasable_tables()}
    labels |= set(trigger_tables())
    for label in list(labels):
        labels |= {follower.label for follower, _ in followers_of(label)}
    return sorted(labels | {"memory.IdempotencyRecord", *REDACTED_TABLES})


def vacuum_tables(*, labels: Iterable[str], rewrite: Iterable[str] = ()) -> dict[str, list[str]]:
    """VACUUM (ANALYZE) each table so the dead tuples of erased rows are reclaimed,
    and rewrite (VACUUM FULL) the tables in ``rewrite``.

    Why rewrite: VACUUM frees an erased row's space but does not overwrite it; a
    page left with no live rows keeps the erased bytes in the table file until new
    rows land there. VACUUM FULL writes the live rows to a new file and deletes the
    old one. It holds the table's exclusive lock while it copies, so it waits at most
    CAIRN_ERASURE_VACUUM_WAIT_S for the lock, and falls back to a plain VACUUM
    (reported in ``rewrite_skipped``); CAIRN_ERASURE_REWRITE=false turns it off.

    VACUUM cannot run inside a transaction block, so it gets its own autocommit
    connection (the job's connection may be inside one, e.g. under tests).
    SKIP_LOCKED first: a table another VACUUM (usually autovacuum) holds is tried
    again afterwards, waiting for the lock like a rewrite. Truncating empty pages
    at the end of a table waits up to 5 s for other transactions' locks
    (CAIRN_ERASURE_VACUUM_TRUNCATE turns it off).
    """
    import psycopg

    def tables_of(names: Iterable[str]) -> set[str]:
        out = set()
        for label in names:
            try:
                out.add(apps.get_model(label)._meta.db_table)
            except LookupError:
                continue
        return out

    full = tables_of(rewrite) if settings.CAIRN_ERASURE_REWRITE else set()
    tables = sorted(tables_of(labels) | full)
    done: dict[str, list[str]] = {
        "vacuumed": [],
        "rewritten": [],
        "skipped": [],
        "rewrite_skipped": [],
    }
    if not tables:
        return done
    params = {
        k: v
        for k, v in connection.get_connection_params().items()
        if k not in ("cursor_factory", "context", "prepare_threshold")
    }
    options = "ANALYZE"
    if not settings.CAIRN_ERASURE_VACUUM_TRUNCATE:
        options += ", TRUNCATE false"
    notices: list[str] = []
    with psycopg.connect(**params, autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        busy = []
        for table in tables:
            if table in full:
                continue
            notices.clear()
            conn.execute(f'VACUUM (SKIP_LOCKED, {options}) "{table}"')
            skipped = any("skipping" in message for message in notices)
            (busy if skipped else done["vacuumed"]).append(table)
        wait = int(settings.CAIRN_ERASURE_VACUUM_WAIT_S * 1000)
        conn.execute(f"SET lock_timeout = '{wait}ms'")
        for table in sorted(full):
            try:
                conn.execute(f'VACUUM (FULL, ANALYZE) "{table}"')
            except psycopg.errors.LockNotAvailable:
                done["rewrite_skipped"].append(table)
                busy.append(table)
            else:
                done["rewritten"].append(table)
        for table in busy:
            try:
                conn.execute(f'VACUUM ({options}) "{table}"')
            except psycopg.errors.LockNotAvailable:
                done["skipped"].append(table)
            else:
                done["vacuumed"].append(table)
    done["vacuumed"].sort()
    return done


def wal_switch() -> bool:
    """Start a new WAL segment and checkpoint, so the segments that held the erased
    rows' inserts (and page images) are behind the checkpoint: PostgreSQL then
    removes them (or, with wal_recycle on, renames them for reuse and overwrites
    them later). Needs a superuser or a role granted pg_checkpoint and EXECUTE on
    pg_switch_wal(); returns False when the role may not (the receipt says so)."""
    import psycopg

    if not settings.CAIRN_ERASURE_WAL_SWITCH:
        return False
    params = {
        k: v
        for k, v in connection.get_connection_params().items()
        if k not in ("cursor_factory", "context", "prepare_threshold")
    }
    try:
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute("SELECT pg_switch_wal()")
            conn.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        return False
    return True
