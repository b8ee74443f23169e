"""Tests for memory.core.openai_embedder against a small local HTTP server. No
database needed."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memory.core import embedders, embeddings
from memory.core.embedders import (
    EMBEDDING_DIMENSIONS,
    EmbeddingBackendError,
    EmbeddingDimensionError,
)
from memory.core.embeddings import get_embedder
from memory.core.openai_embedder import OpenAIEmbedder


@pytest.fixture
def fake_settings(monkeypatch):
    """Replace the settings lookup with a dict, and start with empty caches."""
    values: dict[str, object] = {}
    monkeypatch.setattr(embedders, "_setting", lambda name, default: values.get(name, default))
    embeddings._embedders.clear()
    yield values
    embeddings._embedders.clear()


# --------------------------------------------------------------------------- OpenAI-compatible


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server API
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server.requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
        )
        if server.mode == "error":
            self._send(500, {"error": {"message": "model not loaded"}})
            return
        dims = 3 if server.mode == "wrong_dims" else EMBEDDING_DIMENSIONS
        data = []
        for i, _text in enumerate(body["input"]):
            vec = [0.0] * dims
            vec[server.offset + i] = 2.0  # not unit length: the client normalises
            data.append({"object": "embedding", "index": i, "embedding": vec})
        server.offset += len(body["input"])
        data.reverse()  # servers may answer out of order; "index" says which is which
        self._send(200, {"object": "list", "data": data, "model": body["model"]})

    def _send(self, status, payload):
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.requests, httpd.mode, httpd.offset = [], "ok", 0
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _base_url(httpd):
    return f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def test_openai_backend(server):
    embedder = OpenAIEmbedder(
        base_url=_base_url(server), model="test-model", api_key="sekret", batch_size=2
    )
    try:
        vectors = embedder.embed(["a", "b", "c", "d", "e"])
        single = embedder.embed_one("f")
    finally:
        embedder.close()
    assert len(vectors) == 5
    for i, vec in enumerate([*vectors, single]):
        assert len(vec) == 384
        assert vec[i] == 1.0 and sum(abs(x) for x in vec) == 1.0
    assert [r["body"]["input"] for r in server.requests] == [["a", "b"], ["c", "d"], ["e"], ["f"]]
    assert all(r["path"] == "/v1/embeddings" for r in server.requests)
    assert all(r["body"]["model"] == "test-model" for r in server.requests)
    assert all(r["auth"] == "Bearer sekret" for r in server.requests)


def test_openai_backend_without_key(server):
    embedder = OpenAIEmbedder(base_url=_base_url(server) + "/", model="m")
    assert len(embedder.embed_one("hi")) == 384
    assert server.requests[0]["auth"] is None
    assert server.requests[0]["path"] == "/v1/embeddings"


def test_openai_via_settings(server, fake_settings):
    fake_settings.update(
        CAIRN_EMBEDDER="openai", CAIRN_EMBEDDING_URL=_base_url(server), CAIRN_EMBEDDING_MODEL="m"
    )
    assert get_embedder().embed(["x", "y"])[1][1] == 1.0


def test_openai_wrong_dimensions(server):
    server.mode = "wrong_dims"
    embedder = OpenAIEmbedder(base_url=_base_url(server), model="tiny")
    with pytest.raises(EmbeddingDimensionError, match="384 dimensions, got 3") as excinfo:
        embedder.embed(["a"])
    assert "tiny" in str(excinfo.value) and "CAIRN_EMBEDDING_DIMENSIONS" in str(excinfo.value)


def test_openai_server_error(server):
    server.mode = "error"
    embedder = OpenAIEmbedder(base_url=_base_url(server), model="m")
    with pytest.raises(EmbeddingBackendError, match="HTTP 500.*model not loaded"):
        embedder.embed(["a"])


def test_openai_unreachable():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port = httpd.server_address[1]
    httpd.server_close()  # nothing listens on this port now
    embedder = OpenAIEmbedder(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout=5)
    with pytest.raises(EmbeddingBackendError, match="failed"):
        embedder.embed(["a"])
