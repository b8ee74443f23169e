"""A local HTTP receiver that plays a team's webhook endpoint in tests."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from memory.core.actors import Actor
from memory.webhooks.services import webhook_create
from tests.factories.skills import reviewer


@dataclass
class Received:
    headers: dict
    body: bytes
    at: float

    @property
    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class Receiver:
    """Answers each POST with the next of ``statuses`` (the last one repeats);
    ``hang`` seconds of silence first make every request time out."""

    statuses: list[int] = field(default_factory=lambda: [200])
    hang: float = 0.0
    received: list[Received] = field(default_factory=list)
    url: str = ""

    def wait_for(self, count: int = 1, timeout: float = 30.0, event: str | None = None):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = [r for r in self.received if event is None or r.json["event"] == event]
            if len(got) >= count:
                return got
            time.sleep(0.05)
        raise AssertionError(f"the receiver got {len(self.received)} requests, wanted {count}")


def receiver_start(receiver: Receiver) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            receiver.received.append(Received(dict(self.headers), body, time.monotonic()))
            if receiver.hang:
                time.sleep(receiver.hang)
            index = min(len(receiver.received), len(receiver.statuses)) - 1
            self.send_response(receiver.statuses[index])
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    return server


def admin_actor(workspace) -> Actor:
    return Actor.for_user(reviewer(workspace, role="admin", username=f"admin-{workspace.pk}"))


def hook(workspace, receiver: Receiver, events=None, **kw):
    """A webhook on ``receiver`` wanting ``events`` (all of them by default)."""
    from memory.webhooks.services import SUBSCRIBABLE

    return webhook_create(
        workspace=workspace,
        url=receiver.url,
        events=events or [str(e) for e in SUBSCRIBABLE],
        actor=kw.pop("actor", None) or admin_actor(workspace),
        **kw,
    )
