"""GET /healthz: 200 only when database, pgvector, broker and a worker all answer."""

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

BASE_DIR = Path(__file__).resolve().parents[2]

# Runs the real URL routing and view in a fresh process configured by environment.
PROBE = """
import django, json, os
os.environ["DJANGO_SETTINGS_MODULE"] = "cairn.settings_test"
django.setup()
from django.test import Client
r = Client(HTTP_HOST="localhost").get("/healthz")
print(json.dumps({"status": r.status_code, "body": r.json()}))
"""


def _probe(**env) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=BASE_DIR,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.django_db(transaction=True)
def test_it_is_healthy_with_every_part_up(client, celery_worker_process):
    response = client.get("/healthz")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"] == "ok"
    assert body["pgvector"].startswith("0.8")
    assert body["broker"] == "ok"
    assert body["workers"] >= 1


def test_it_is_unhealthy_when_the_broker_is_down():
    result = _probe(REDIS_URL="redis://127.0.0.1:1/0")
    assert result["status"] == 503
    assert result["body"]["broker"] == "down"
    assert result["body"]["status"] == "unhealthy"


SYSTEM_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def system_postgres_db():
    """A scratch database on the machine's PostgreSQL 15, which has no pgvector."""
    name = f"cairn_nopgvector_{os.getpid()}"
    with psycopg.connect(SYSTEM_PG, autocommit=True) as conn:
        available = conn.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
        assert available is None, "this test needs a PostgreSQL without pgvector"
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    with psycopg.connect(SYSTEM_PG, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_healthz_names_missing_pgvector_and_the_fix(system_postgres_db):
    result = _probe(DATABASE_URL=system_postgres_db)
    assert result["status"] == 503
    body = result["body"]
    assert body["database"] == "ok"
    assert body["pgvector"] == "missing"
    problem = " ".join(body["problems"])
    assert "pgvector is not installed" in problem
    assert "unset DATABASE_URL" in problem


def test_startup_refuses_a_database_without_pgvector(system_postgres_db):
    out = subprocess.run(
        [sys.executable, "manage.py", "cairn_setup"],
        cwd=BASE_DIR,
        env={**os.environ, "DATABASE_URL": system_postgres_db},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert "pgvector is not installed" in out.stderr
    assert "Traceback" not in out.stderr
    # And a plain migrate stops at the extension with the same explanation.
    out = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=BASE_DIR,
        env={**os.environ, "DATABASE_URL": system_postgres_db},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert "pgvector is not installed" in out.stderr
