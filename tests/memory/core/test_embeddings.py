"""Tests for memory.core.embeddings: choosing a backend from settings. No database needed."""

from __future__ import annotations

import pytest

from memory.core import embedders, embeddings
from memory.core.embedders import EmbeddingConfigError
from memory.core.embeddings import get_embedder
from memory.core.local_embedder import LocalEmbedder
from memory.core.openai_embedder import OpenAIEmbedder


@pytest.fixture
def fake_settings(monkeypatch):
    """Replace the settings lookup with a dict, and start with empty caches."""
    values: dict[str, object] = {}
    monkeypatch.setattr(embedders, "_setting", lambda name, default: values.get(name, default))
    embeddings._embedders.clear()
    yield values
    embeddings._embedders.clear()


# --------------------------------------------------------------------------- settings


def test_get_embedder_defaults_to_cached_local(fake_settings):
    embedder = get_embedder()
    assert isinstance(embedder, LocalEmbedder)
    assert embedder.batch_size == 32 and embedder.threads == 2
    assert get_embedder() is embedder


def test_get_embedder_reads_settings(fake_settings):
    fake_settings.update(
        CAIRN_EMBEDDER="openai",
        CAIRN_EMBEDDING_URL="http://127.0.0.1:9/v1/",
        CAIRN_EMBEDDING_MODEL="nomic-embed-text",
        CAIRN_EMBEDDING_BATCH="8",
    )
    embedder = get_embedder()
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.url == "http://127.0.0.1:9/v1/embeddings"
    assert embedder.model_id == "nomic-embed-text"
    assert embedder.dimensions == 384 and embedder.batch_size == 8


@pytest.mark.parametrize(
    "values, message",
    [
        ({"CAIRN_EMBEDDER": "bogus"}, "CAIRN_EMBEDDER"),
        ({"CAIRN_EMBEDDER": "openai", "CAIRN_EMBEDDING_MODEL": "m"}, "CAIRN_EMBEDDING_URL"),
        ({"CAIRN_EMBEDDER": "openai", "CAIRN_EMBEDDING_URL": "http://x"}, "CAIRN_EMBEDDING_MODEL"),
        ({"CAIRN_EMBEDDING_BATCH": 0}, "CAIRN_EMBEDDING_BATCH"),
        ({"CAIRN_EMBEDDING_THREADS": "many"}, "CAIRN_EMBEDDING_THREADS"),
        ({"CAIRN_EMBEDDING_DIMENSIONS": 768}, "CAIRN_EMBEDDING_DIMENSIONS"),
    ],
)
def test_bad_settings(fake_settings, values, message):
    fake_settings.update(values)
    with pytest.raises(EmbeddingConfigError, match=message):
        get_embedder()
