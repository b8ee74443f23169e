"""`make run` started while the previous instance is still stopping waits for it,
or says so in a sentence, instead of dying with a bare AssertionError."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cairn import embedded

BASE = Path(__file__).resolve().parent.parent


def _pid_file(var: Path, pid: int, status: str | None) -> None:
    pgdata = var / "postgres"
    pgdata.mkdir(parents=True, exist_ok=True)
    lines = [str(pid), str(pgdata), str(int(time.time())), "5432", str(var), "localhost"]
    if status is not None:
        lines += ["0 0", status]
    (pgdata / "postmaster.pid").write_text("\n".join(lines) + "\n")


@pytest.fixture
def stopping(tmp_path):
    """A process standing in for a PostgreSQL that is still shutting down."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    _pid_file(tmp_path, proc.pid, "stopping")
    yield tmp_path, proc
    proc.kill()
    proc.wait()


def test_run_says_clearly_that_the_last_instance_is_still_stopping(stopping):
    var, proc = stopping
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        CAIRN_VAR_DIR=str(var),
        CAIRN_EMBEDDED_STOP_WAIT="1",
        REDIS_URL="redis://127.0.0.1:9/0",  # external: no Valkey started for this test
    )
    out = subprocess.run(
        [sys.executable, "-m", "cairn.embedded", "run", "--", "true"],
        cwd=BASE,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert f"(pid {proc.pid}) is still stopping" in out.stderr
    assert "waiting up to 1s" in out.stderr
    assert "AssertionError" not in out.stderr and "Traceback" not in out.stderr


def test_it_waits_for_the_last_instance_to_finish_stopping(tmp_path, monkeypatch, capsys):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"])
    _pid_file(tmp_path, proc.pid, "stopping")
    monkeypatch.setenv("CAIRN_VAR_DIR", str(tmp_path))
    monkeypatch.setenv("CAIRN_EMBEDDED_STOP_WAIT", "30")
    # Reaped as soon as it exits, as the real server's parent would.
    reaper = threading.Thread(target=proc.wait)
    reaper.start()
    started = time.monotonic()
    embedded._wait_while_changing()
    reaper.join()
    assert time.monotonic() - started >= 0.5
    assert "is stopping; waiting up to 30s" in capsys.readouterr().err


def test_a_half_written_pid_file_is_not_an_assertion_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CAIRN_VAR_DIR", str(tmp_path))
    _pid_file(tmp_path, os.getpid(), None)  # six lines of eight: being written
    assert embedded._postmaster() is None
    assert embedded.postmaster_changing() == (os.getpid(), "starting")
