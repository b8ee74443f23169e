"""Over-long URLs and over-size bodies against the Procfile's own web process (gunicorn).

The API answers both in its JSON error shape and the UI with a page; a refused body
either leaves the connection usable (keep-alive, body drained) or says
``Connection: close`` and closes it, never keep-alive and then a dropped connection.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings

BASE = Path(__file__).resolve().parent.parent


def _web_command(port: int) -> list[str]:
    line = next(x for x in (BASE / "Procfile").read_text().splitlines() if x.startswith("web:"))
    command = line.removeprefix("web:").strip()
    command = command.replace("$PORT", str(port)).replace("${WEB_CONCURRENCY:-2}", "1")
    argv = shlex.split(command)
    argv[argv.index("--access-logfile") + 1] = os.devnull
    return argv


@pytest.fixture
def web(transactional_db):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="cairn.settings_test",
        CAIRN_DATABASE_NAME=settings.DATABASES["default"]["NAME"],
        CAIRN_REFUSED_BODY_DRAIN_BYTES=str(8 * 1024 * 1024),
    )
    proc = subprocess.Popen(_web_command(port), cwd=BASE, env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _exchange(sock: socket.socket, head: bytes, body_len: int = 0) -> tuple[bytes, bytes]:
    """Send a request (``body_len`` bytes of body), read one response: (head, body)."""
    sock.sendall(head)
    sent = 0
    try:
        while sent < body_len:
            n = min(65536, body_len - sent)
            sock.sendall(b"a" * n)
            sent += n
    except OSError:
        pass  # the server may close before the client is done sending: read the answer
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "connection closed before a response"
        data += chunk
    raw_head, _, rest = data.partition(b"\r\n\r\n")
    headers = raw_head.decode("latin-1").lower()
    if "content-length:" in headers:
        length = int(headers.split("content-length:")[1].split("\r\n")[0])
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        return raw_head, rest[:length]
    while not rest.endswith(b"0\r\n\r\n"):  # chunked
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    body, text = b"", rest
    while text:
        size_line, _, text = text.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        body, text = body + text[:size], text[size + 2 :]
    return raw_head, body


def _connect(port):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(20)
    return sock


def test_over_long_urls_answer_414_in_the_api_error_shape(web):
    with _connect(web) as sock:
        head, body = _exchange(
            sock,
            b"GET /api/v1/knowledge/?q=" + b"x" * 5000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n",
        )
    assert head.startswith(b"HTTP/1.1 414")
    assert json.loads(body)["error"]["code"] == "uri_too_long"
    with _connect(web) as sock:  # past gunicorn's own request-line limit
        head, body = _exchange(
            sock, b"GET /api/v1/" + b"x" * 9000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n"
        )
    assert head.startswith(b"HTTP/1.1 414") and b"application/json" in head
    assert json.loads(body)["error"]["code"] == "uri_too_long"
    with _connect(web) as sock:  # the UI answers with a page
        head, body = _exchange(
            sock, b"GET /knowledge/?q=" + b"x" * 5000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n"
        )
    assert head.startswith(b"HTTP/1.1 414") and b"text/html" in head


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        (b"/api/v1/knowledge/", b"application/json"),
        (b"/login/", b"application/x-www-form-urlencoded"),
    ],
)
def test_a_refused_body_keeps_the_connection_usable_or_says_close(web, path, content_type):
    def post(sock, size):
        return _exchange(
            sock,
            b"POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
            % (path, content_type, size),
            size,
        )

    with _connect(web) as sock:
        head, body = post(sock, 3_000_000)  # over 2.5 MB, under the drain limit
        assert head.startswith(b"HTTP/1.1 413") and b"connection: keep-alive" in head.lower()
        if path.startswith(b"/api/"):
            assert json.loads(body)["error"]["code"] == "too_large"
        again, _ = _exchange(sock, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert again.startswith(b"HTTP/1.1 ")  # the same connection answers again
    with _connect(web) as sock:
        head, _ = post(sock, 12_000_000)  # over the drain limit: said and done
        assert head.startswith(b"HTTP/1.1 413") and b"connection: close" in head.lower()
        assert sock.recv(100) == b""
