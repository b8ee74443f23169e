"""The access log holds no query strings, referers, userinfo or data-bearing path segments."""

import os
import re
import shlex
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from cairn.accesslog import path_shape

BASE = Path(__file__).resolve().parent.parent


def test_path_shape_keeps_places_and_ids_and_drops_data():
    assert path_shape("/api/v1/knowledge/42/") == "/api/v1/knowledge/42/"
    assert (
        path_shape("/api/v1/conversations/sess-8f2a1c/turns/") == "/api/v1/conversations/-/turns/"
    )
    assert path_shape("/api/v1/facts/people/sarah_chen/") == "/api/v1/facts/-/-/"
    assert path_shape("/api/v1/skills/triage/effective/") == "/api/v1/skills/-/effective/"
    assert "ghp_" not in path_shape("/x/https://deploy:ghp_secret@github.com/a")
    assert path_shape("/knowledge/7/") == "/knowledge/7/"


def _web_command(port: int, log: Path) -> list[str]:
    """The Procfile's own web line, so the test checks what operators run."""
    line = next(x for x in (BASE / "Procfile").read_text().splitlines() if x.startswith("web:"))
    command = line.removeprefix("web:").strip()
    command = command.replace("$PORT", str(port)).replace("${WEB_CONCURRENCY:-2}", "1")
    argv = shlex.split(command)
    argv[argv.index("--access-logfile") + 1] = str(log)
    return argv


@pytest.mark.django_db(transaction=True)
def test_the_procfile_web_process_logs_no_secrets_or_session_ids(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path / "access.log"
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="cairn.settings_test",
        CAIRN_DATABASE_NAME=settings.DATABASES["default"]["NAME"],
    )
    proc = subprocess.Popen(_web_command(port, log), cwd=BASE, env=env, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url + "/healthz", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        secret = "ghp_SeCrEtToKeN123"
        httpx.get(
            url + "/api/v1/context/",
            params={"project_remote": f"https://deploy:{secret}@github.com/acme/x"},
            headers={"Referer": f"{url}/?q=private-query-words", "User-Agent": "agent/1"},
        )
        httpx.get(url + "/api/v1/conversations/sess-Private-Session-77/turns/")
        httpx.get(url + "/api/v1/knowledge/12/")
        time.sleep(1.5)  # the access log is written after the response
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    text = log.read_text()
    assert re.search(r'"GET /api/v1/context/" \d{3}', text), text
    assert '"GET /api/v1/knowledge/12/"' in text
    for leaked in (secret, "deploy", "private-query-words", "Private-Session-77", "agent/1"):
        assert leaked not in text, leaked
