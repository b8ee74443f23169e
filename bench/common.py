"""Shared set-up for benchmark scripts.

Benchmarks run against the same kind of services as production (the embedded
PostgreSQL + pgvector, or DATABASE_URL), in a database of their own
(``cairn_bench`` unless CAIRN_BENCH_DATABASE says otherwise) that is created,
migrated, and dropped at the end, so they never touch your data.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BENCH_DATABASE = os.environ.get("CAIRN_BENCH_DATABASE", "cairn_bench")


def _admin_connection(db_settings: dict):
    import psycopg

    return psycopg.connect(
        host=db_settings.get("HOST") or None,
        port=db_settings.get("PORT") or None,
        user=db_settings.get("USER") or None,
        password=db_settings.get("PASSWORD") or None,
        dbname="postgres",
        autocommit=True,
    )


# The per-token request budgets (agents/budget.py) guard against one runaway agent; a
# benchmark drives one token far faster than an agent does, and a 429 would time the
# bench's own pacing. Lifted for the benches' own process and the servers they start,
# unless set in the environment; bench_load.py keeps them (``gunicorn_start(budgets=True)``).
UNBUDGETED = {
    "CAIRN_WRITE_RATE_PER_MIN": str(10**9),
    "CAIRN_WRITE_BYTES_PER_MIN": str(10**12),
    "CAIRN_RECALL_RATE_PER_MIN": str(10**9),
    "CAIRN_WORKSPACE_CONCURRENT_REQUESTS": "1000",
}
_LIFTED: set[str] = set()


def setup_django(database: str = BENCH_DATABASE) -> None:
    """Point Django at the bench database (created and migrated if needed)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
    for name, value in UNBUDGETED.items():
        if name not in os.environ:
            os.environ[name] = value
            _LIFTED.add(name)
    os.environ["CAIRN_DATABASE_NAME"] = database
    os.environ.setdefault("CAIRN_REDIS_DB", "2")
    from django.conf import settings

    db = settings.DATABASES["default"]
    with _admin_connection(db) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone():
            conn.execute(f'CREATE DATABASE "{database}"')
    import django

    django.setup()
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    call_command("migrate", verbosity=0)
    setup_test_environment()  # lets django.test.Client talk to the app


def drop_database(database: str = BENCH_DATABASE) -> None:
    from django.conf import settings
    from django.db import connections

    connections.close_all()
    with _admin_connection(settings.DATABASES["default"]) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def assert_bench_database() -> None:
    """Refuse to run destructive set-up anywhere but the bench database."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        name = cursor.fetchone()[0]
    if name != BENCH_DATABASE:
        raise SystemExit(f"refusing to truncate tables in {name!r}; expected {BENCH_DATABASE!r}")


def percentiles(samples_s: list[float]) -> dict:
    import numpy as np

    ms = np.array(samples_s) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p95_ms": round(float(np.percentile(ms, 95)), 3),
        "mean_ms": round(float(ms.mean()), 3),
        "n": len(samples_s),
    }


def timed(fn, repeat: int) -> list[float]:
    out = []
    for i in range(repeat):
        started = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - started)
    return out


# memory_knowledge's columns, in the order copy_knowledge() takes each row.
KNOWLEDGE_COPY_COLUMNS = (
    "workspace_id, content, category, domain, entity, context, sensitive, source, "
    "confidence, use_count, metadata, operation_key, pinned, sealed, status, embedding, "
    "embedding_model, channel, created_at, updated_at, observed_at"
)
_KNOWLEDGE_COPY_TYPES = [
    "bigint", "text", "varchar", "varchar", "varchar", "varchar", "bool", "varchar",
    "float8", "int4", "jsonb", "varchar", "bool", "bool", "varchar", "vector",
    "varchar", "varchar", "timestamptz", "timestamptz", "timestamptz",
]  # fmt: skip


def copy_knowledge(rows) -> None:
    """Binary COPY of knowledge rows (tuples in KNOWLEDGE_COPY_COLUMNS order) with
    pgvector's psycopg adapter: far faster than INSERTs for loading a bench table."""
    from django.db import connection
    from pgvector.psycopg import register_vector

    connection.ensure_connection()
    register_vector(connection.connection)
    with connection.connection.cursor() as cursor:
        with cursor.copy(
            f"COPY memory_knowledge ({KNOWLEDGE_COPY_COLUMNS}) FROM STDIN WITH (FORMAT BINARY)"
        ) as cp:
            cp.set_types(_KNOWLEDGE_COPY_TYPES)
            for row in rows:
                cp.write_row(row)


@contextmanager
def stopwatch():
    box = {}
    started = time.perf_counter()
    yield box
    box["s"] = time.perf_counter() - started


def machine() -> dict:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        pg = cursor.fetchone()[0]
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        pgvector = cursor.fetchone()[0]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "postgres": pg,
        "pgvector": pgvector,
        "commit": commit,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        # The box may be shared: a load above the CPU count means noisy latencies.
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def table(rows: list[dict], columns: list[str]) -> str:
    """A GitHub-flavoured markdown table."""
    head = "| " + " | ".join(columns) + " |"
    rule = "| " + " | ".join("---" for _ in columns) + " |"
    body = ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join([head, rule, *body])


# --- the production web server, as `make run` starts it ----------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def gunicorn_command(port: int, *, workers: int | None = None, extra: list[str] = ()) -> list[str]:
    """The ``web:`` line of the Procfile (what ``make run`` serves with), for ``port``.

    Benchmarks measure the server configuration production runs (worker class,
    workers, threads), not one of their own; only the access log is dropped (it
    would measure the terminal) and ``extra`` flags (e.g. a longer ``--timeout``
    for big batches) are appended.
    """
    import shlex

    line = next(
        raw.split(":", 1)[1]
        for raw in (ROOT / "Procfile").read_text().splitlines()
        if raw.startswith("web:")
    )
    env = {"PORT": str(port), "WEB_CONCURRENCY": str(workers or 2)}
    line = line.replace("${WEB_CONCURRENCY:-2}", env["WEB_CONCURRENCY"]).replace(
        "$PORT", env["PORT"]
    )
    args = shlex.split(line)
    if "--access-logfile" in args:
        i = args.index("--access-logfile")
        del args[i : i + 2]
    args[0] = str(ROOT / args[0]) if not Path(args[0]).is_absolute() else args[0]
    return [*args, "--log-level", "warning", *extra]


def gunicorn_start(
    port: int,
    *,
    database: str = BENCH_DATABASE,
    extra: list[str] = (),
    settings: str = "cairn.settings",
    budgets: bool = False,
    env_extra: dict[str, str] | None = None,
):
    """Start the production gunicorn on the bench database; wait until it answers.

    ``settings="server_settings"`` adds the bare DRF view (``bench/server_settings.py``).
    ``budgets=True`` keeps the per-token request budgets at their configured values
    (``UNBUDGETED`` lifts them otherwise); ``env_extra`` sets more of the environment.
    """
    import httpx

    inherited = {k: v for k, v in os.environ.items() if not (budgets and k in _LIFTED)}
    env = {**inherited, **(env_extra or {}), "CAIRN_DATABASE_NAME": database,
           "DJANGO_SETTINGS_MODULE": settings,
           # CAIRN_BENCH_REDIS_DB: a second bench run in parallel (own database too)
           "CAIRN_REDIS_DB": os.environ.get("CAIRN_BENCH_REDIS_DB", "2"),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), str(ROOT),
                                          os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    server = subprocess.Popen(gunicorn_command(port, extra=extra), cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/api/v1/schema/", timeout=10).status_code == 200:
                return server, url
        except httpx.HTTPError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise SystemExit("gunicorn did not start")
        time.sleep(0.3)


def worker_pids(server_pid: int) -> list[int]:
    children = Path(f"/proc/{server_pid}/task/{server_pid}/children")
    return sorted(int(pid) for pid in children.read_text().split())


def rss_mb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    except FileNotFoundError:
        return None
    return None
