"""`make run` says where to go only once /healthz is green, and the first-start
credentials box is the last thing printed (cairn/ready.py, run by bin/cairn-serve)."""

from __future__ import annotations

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BOX = "=" * 72 + "\n  Username     admin\n  Password     pw-shown-once\n" + "=" * 72


def _server(unhealthy_answers: int):
    """A stand-in web process: /healthz answers 503 (with a problem) some times, then 200."""
    seen = {"n": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen["n"] += 1
            ok = seen["n"] > unhealthy_answers
            body = b'{"status":"ok"}' if ok else b'{"problems":["no Celery worker answered"]}'
            self.send_response(200 if ok else 503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def _ready(port: int, *, wait_s: str = "120"):
    return subprocess.run(
        [sys.executable, "-m", "cairn.ready"],
        input=BOX,
        capture_output=True,
        text=True,
        env={"PORT": str(port), "SITE_URL": "http://localhost:8000", "CAIRN_READY_WAIT_S": wait_s},
        timeout=200,
    )


def test_the_address_comes_after_healthz_is_green_and_the_box_comes_last():
    server, seen = _server(unhealthy_answers=3)
    try:
        done = _ready(server.server_address[1])
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stdout + done.stderr
    assert seen["n"] == 4  # three 503s, then the 200 it announced
    out = done.stdout
    assert "ready (/healthz is green). Open http://localhost:8000/" in out
    assert out.index("Open http://localhost:8000/") < out.index("pw-shown-once")
    assert out.rstrip().endswith("=" * 72)
    assert all(len(line) <= 80 for line in out.splitlines())


def test_a_server_that_never_gets_healthy_says_why_and_still_shows_the_box():
    server, _ = _server(unhealthy_answers=10**9)
    try:
        done = _ready(server.server_address[1], wait_s="2")
    finally:
        server.shutdown()
    assert done.returncode == 1
    assert "still not healthy" in done.stdout and "no Celery worker answered" in done.stdout
    assert "pw-shown-once" in done.stdout and "Open http" not in done.stdout
