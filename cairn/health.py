"""Health of every part: database, pgvector, broker, workers (SPEC section 11)."""

from __future__ import annotations

from django.conf import settings
from django.db import connection

PGVECTOR_MISSING = (
    "pgvector is not installed on the PostgreSQL server at {where}. Cairn stores its "
    "vectors there. Fix: install the pgvector extension on that server (package "
    "postgresql-<version>-pgvector, or the pgvector/pgvector Docker image), or unset "
    "DATABASE_URL to use the embedded PostgreSQL, which ships it."
)


def _where() -> str:
    db = settings.DATABASES["default"]
    return f"{db.get('HOST') or 'local socket'}:{db.get('PORT') or 5432}/{db.get('NAME')}"


def pgvector_problem() -> str | None:
    """None when the vector extension is available (or installed); else a clear message."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT installed_version, default_version FROM pg_available_extensions"
            " WHERE name = 'vector'"
        )
        row = cursor.fetchone()
    if row is None:
        return PGVECTOR_MISSING.format(where=_where())
    return None


def check_database() -> tuple[str, str | None]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok", None
    except Exception as exc:  # any failure to reach the database is "down"
        return "down", f"database: {exc.__class__.__name__}: {str(exc).strip()[:300]}"


def check_pgvector() -> tuple[str, str | None]:
    try:
        problem = pgvector_problem()
        if problem:
            return "missing", problem
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
        if row is None:
            return "not_migrated", "pgvector is available but not created; run migrations."
        return row[0], None
    except Exception as exc:
        return "down", f"pgvector: {exc.__class__.__name__}: {str(exc).strip()[:300]}"


def check_broker() -> tuple[str, str | None]:
    import redis

    try:
        client = redis.Redis.from_url(
            settings.CELERY_BROKER_URL, socket_timeout=1, socket_connect_timeout=1
        )
        client.ping()
        return "ok", None
    except Exception as exc:
        return "down", f"broker: {exc.__class__.__name__}: {exc}"


def check_workers() -> tuple[int, str | None]:
    from cairn.celery import app

    try:
        replies = app.control.ping(timeout=settings.CAIRN_WORKER_PING_TIMEOUT_S) or []
    except Exception as exc:
        return 0, f"workers: {exc.__class__.__name__}: {exc}"
    if not replies:
        return 0, "workers: no Celery worker answered a ping; start one (make run does)."
    return len(replies), None


def health() -> tuple[bool, dict]:
    database, db_err = check_database()
    problems = [db_err] if db_err else []
    if database == "ok":
        pgvector, pg_err = check_pgvector()
    else:
        pgvector, pg_err = "unknown", None
    broker, broker_err = check_broker()
    workers, worker_err = (0, None) if broker != "ok" else check_workers()
    problems += [p for p in (pg_err, broker_err, worker_err) if p]
    healthy = database == "ok" and not pg_err and broker == "ok" and workers > 0
    body = {
        "status": "ok" if healthy else "unhealthy",
        "database": database,
        "pgvector": pgvector,
        "broker": broker,
        "workers": workers,
    }
    if problems:
        body["problems"] = problems
    return healthy, body
