"""Shared by the maintenance tests: a local OpenAI-compatible chat server, and a slow
worker of our own to kill mid-run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings as django_settings

from tests.conftest import BASE_DIR, _worker_env


class _Model(BaseHTTPRequestHandler):
    answers: list = []
    seen: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append((self.path, self.headers.get("Authorization"), body))
        status, text = type(self).answers.pop(0)
        payload = json.dumps({"choices": [{"message": {"content": text}}]}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def model(settings):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.CAIRN_JUDGE_URL = f"http://127.0.0.1:{server.server_port}/v1"
    settings.CAIRN_JUDGE_MODEL = "tiny"
    settings.CAIRN_JUDGE_API_KEY = "k-test"
    settings.CAIRN_JUDGE_MAX_PER_MINUTE = 6000
    _Model.answers, _Model.seen = [], []
    yield _Model
    server.shutdown()


@pytest.fixture
def slow_worker():
    """Start a worker on its own queue, one item per step and a pause after each, so a
    test can kill it part-way (the test kills it; stopped here if it did not)."""
    started = []

    def start(queue: str) -> subprocess.Popen:
        env = _worker_env(django_settings.DATABASES["default"]["NAME"])
        env.update(
            CAIRN_RECONCILE_BATCH="1",
            CAIRN_MAINTENANCE_STEP_DELAY_S="1.5",
        )
        log = open(BASE_DIR / "var" / f"test-worker-{queue}.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "cairn", "worker", "-Q", queue]
            + ["--pool", "solo", "--hostname", f"{queue}-{os.getpid()}@%h"]
            + ["--without-mingle", "--without-gossip"],
            cwd=BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=20)
