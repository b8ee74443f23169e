"""Reads on a real streaming replica (cairn/db_router.py, issue 52).

A second PostgreSQL is copied from the test's own primary with pg_basebackup and
started as a hot standby (cairn/embedded.py, what ``CAIRN_REPLICA=1`` starts). The
tests write on the primary through the API and read through the router: the
replica answers recall and the UI's lists once it has replayed the write; a
replica held behind (replay paused) is passed over for the primary; a killed one
too, with no 5xx.
"""

from __future__ import annotations

import os
import shutil
import time

import psycopg
import pytest
from django.db import connections
from django.test import override_settings

from cairn import db_router, embedded

# The replica is one more database of these tests (a mirror of the default one
# for Django's test machinery: never created or flushed, it replays the primary).
pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "replica"])


@pytest.fixture(scope="module")
def replica_server(django_db_setup):
    """A replica of the test database, registered as the ``replica`` alias for this
    module's tests (module scope: set up before Django's per-test database checks)."""
    primary = connections["default"].settings_dict
    source = {"HOST": primary["HOST"], "PORT": primary["PORT"], "USER": "postgres"}
    pgdata = embedded.var_dir() / f"test-replica-{os.getpid()}"
    shutil.rmtree(pgdata, ignore_errors=True)
    info = embedded.start_replica(source, pgdata)
    connections.settings[db_router.REPLICA] = {
        **primary,
        **info,
        "OPTIONS": {**primary["OPTIONS"], "connect_timeout": 2},
        "TEST": {**primary["TEST"], "MIRROR": "default"},
    }
    yield {"pgdata": pgdata, "source": source}
    connections[db_router.REPLICA].close()
    del connections[db_router.REPLICA]
    del connections.settings[db_router.REPLICA]
    db_router._down_until = 0.0
    embedded.stop_replica(pgdata, mode="immediate")
    shutil.rmtree(pgdata, ignore_errors=True)


@pytest.fixture
def replica(replica_server, settings):
    """The replica running (started again if a test killed it), its statements recorded.
    Reads wait up to 10 s for it to replay (a bound: on this loaded machine 200 ms
    is not always enough, and then the read would rightly go to the primary)."""
    settings.CAIRN_REPLICA_WAIT_MS = 10_000
    pgdata = replica_server["pgdata"]
    replica_conn = connections[db_router.REPLICA]
    info = embedded.start_replica(replica_server["source"], pgdata)
    if info["PORT"] != replica_conn.settings_dict["PORT"]:
        replica_conn.close()
        replica_conn.settings_dict.update(info)
    db_router._down_until = 0.0
    seen: list[str] = []

    def record(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    replica_conn.execute_wrappers.append(record)

    def raw():
        return psycopg.connect(
            host=info["HOST"], port=info["PORT"], user="postgres",
            dbname=replica_conn.settings_dict["NAME"], autocommit=True,
        )  # fmt: skip

    with raw() as conn:  # a test that failed while replay was paused
        conn.execute("SELECT pg_wal_replay_resume()")
    yield {"pgdata": pgdata, "seen": seen, "raw": raw}
    replica_conn.execute_wrappers.remove(record)


def _remember(api, content: str) -> int:
    response = api.post("/api/v1/knowledge/", {"content": content}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _recall(api, query: str) -> list[int]:
    response = api.post("/api/v1/recall/", {"query": query}, format="json")
    assert response.status_code == 200, response.content
    return [r["id"] for r in response.json()["results"]]


def _caught_up(replica_conn, limit_s: float = 120) -> None:
    """Wait until the replica has replayed what the primary has written (a bound, not
    a timing: on a loaded machine replay after a pause takes what it takes)."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_insert_lsn()::text")
        lsn = cursor.fetchone()[0]
    deadline = time.monotonic() + limit_s
    query = "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn"
    while not replica_conn.execute(query, [lsn]).fetchone()[0]:
        assert time.monotonic() < deadline, "the replica did not catch up"
        time.sleep(0.05)


def _on_replica(seen: list[str]) -> bool:
    return any("vec_scope" in sql for sql in seen)


def test_reads_own_write_on_the_replica_then_survives_its_death(replica, api):
    seen = replica["seen"]
    heron = _remember(api, "The heron nests by the old weir every spring")
    assert heron in _recall(api, "where does the heron nest")
    assert _on_replica(seen), "recall did not read on the replica"

    # A second write, read at once: the router waited for the replica to replay it.
    seen.clear()
    kettle = _remember(api, "The blue kettle lives on the top shelf of the pantry")
    assert kettle in _recall(api, "where is the blue kettle")
    assert _on_replica(seen)

    embedded.stop_replica(replica["pgdata"], mode="immediate")
    seen.clear()
    lamp = _remember(api, "The brass lamp was repaired by Ilse in March")
    for query in ("who repaired the brass lamp", "where is the blue kettle"):
        assert _recall(api, query)[:1] in ([lamp], [kettle])
    assert not _on_replica(seen)
    assert lamp in _recall(api, "brass lamp Ilse")


def test_a_replica_behind_is_passed_over_for_the_primary(replica, api):
    with replica["raw"]() as conn:
        conn.execute("SET statement_timeout = '60s'")
        # Paused only once caught up: never in the middle of replaying a transaction
        # whose locks (the last test's flush) a read on the replica would wait for.
        _caught_up(conn)
        conn.execute("SELECT pg_wal_replay_pause()")
        try:
            with override_settings(CAIRN_REPLICA_WAIT_MS=50):
                violin = _remember(api, "The violin ledger is kept in the orchard shed")
                replica["seen"].clear()
                assert violin in _recall(api, "where is the violin ledger kept")
            # The replica really had not replayed it: read there, it would be missing.
            missing = conn.execute(
                "SELECT count(*) FROM memory_knowledge WHERE id = %s", [violin]
            ).fetchone()[0]
            assert missing == 0
            assert not _on_replica(replica["seen"])
        finally:
            conn.execute("SELECT pg_wal_replay_resume()")
        _caught_up(conn)
    replica["seen"].clear()
    assert violin in _recall(api, "where is the violin ledger kept")
    assert _on_replica(replica["seen"])


def test_ui_list_pages_read_their_page_on_the_replica(replica, member_client, workspace, api):
    client = member_client(workspace=workspace, role="admin")
    otter = _remember(api, "The otter visits the mill race at dusk")
    replica["seen"].clear()
    response = client.get("/knowledge/")
    assert response.status_code == 200
    assert b"otter visits the mill race" in response.content
    assert any("memory_knowledge" in sql for sql in replica["seen"])
    assert otter


def test_the_replica_refuses_reads_that_skip_the_check(replica):
    with pytest.raises(db_router.ReplicaOutsideCheck):
        with connections[db_router.REPLICA].cursor() as cursor:
            cursor.execute("SELECT 1")
