"""What every embedder shares: the interface, its settings, its errors and the check
on client-supplied vectors. The backends are ``local_embedder`` (the offline MiniLM
ONNX model) and ``openai_embedder`` (an OpenAI-compatible endpoint); pick one
through ``memory.core.embeddings.get_embedder``."""

from __future__ import annotations

import abc
import logging
import math
import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)


#: Size of the vectors of the default (local) model, and the default expected size.
EMBEDDING_DIMENSIONS = 384


class EmbeddingError(Exception):
    """Base class for embedding failures."""


class EmbeddingConfigError(EmbeddingError):
    """The CAIRN_EMBEDDING_* settings are invalid."""


class ModelIntegrityError(EmbeddingError):
    """The model or tokenizer file is missing, altered, or not what we expect."""


class EmbeddingBackendError(EmbeddingError):
    """The embedding server failed or answered something unusable."""


class EmbeddingDimensionError(EmbeddingError, ValueError):
    """A vector has the wrong number of dimensions or a non-finite/non-numeric component."""


_MISSING = object()


def _setting(name: str, default: Any) -> Any:
    """Django setting ``name`` if Django is configured, else env var ``name``, else default."""
    value: Any = _MISSING
    try:
        from django.conf import settings
        from django.core.exceptions import ImproperlyConfigured
    except ImportError:  # pragma: no cover - Django is a dependency
        pass
    else:
        try:
            value = getattr(settings, name, _MISSING)
        except ImproperlyConfigured:  # DJANGO_SETTINGS_MODULE not set
            value = _MISSING
    if value is _MISSING:
        value = os.environ.get(name, _MISSING)
    return default if value is _MISSING else value


def _int_setting(name: str, default: int, *, minimum: int) -> int:
    raw = _setting(name, default)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise EmbeddingConfigError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise EmbeddingConfigError(f"{name} must be >= {minimum}, got {value}")
    return value


@dataclass(frozen=True)
class EmbedderConfig:
    """Which embedder to build and how: backend, endpoint, model, batch and threads."""

    backend: str
    url: str
    model: str
    api_key: str = field(repr=False)
    batch_size: int
    threads: int
    dimensions: int


def embedder_config() -> EmbedderConfig:
    """The embedder settings as they stand now (read on each call, so tests can override)."""
    return EmbedderConfig(
        backend=str(_setting("CAIRN_EMBEDDER", "local") or "local").strip().lower(),
        url=str(_setting("CAIRN_EMBEDDING_URL", "") or "").strip(),
        model=str(_setting("CAIRN_EMBEDDING_MODEL", "") or "").strip(),
        api_key=str(_setting("CAIRN_EMBEDDING_API_KEY", "") or "").strip(),
        batch_size=_int_setting("CAIRN_EMBEDDING_BATCH", 32, minimum=1),
        threads=_int_setting("CAIRN_EMBEDDING_THREADS", 2, minimum=0),
        dimensions=_int_setting("CAIRN_EMBEDDING_DIMENSIONS", EMBEDDING_DIMENSIONS, minimum=1),
    )


class Embedder(abc.ABC):
    """Turns texts into L2-normalised vectors of ``dimensions`` floats."""

    model_id: str
    dimensions: int

    @abc.abstractmethod
    def _embed(self, texts: list[str]) -> list[list[float]]: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts``; the result is in the same order."""
        if isinstance(texts, str | bytes):
            raise TypeError("embed() takes a list of strings; use embed_one() for one text")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}] must be str, got {type(t).__name__}")
        if not texts:
            return []
        return self._embed(texts)

    def embed_one(self, text: str) -> list[float]:
        """Embed a single text."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, got {type(text).__name__}")
        return self._embed([text])[0]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model_id} ({self.dimensions} dims)>"


# Largest magnitude a pgvector (float4) component can hold.
_FLOAT32_MAX = 3.4028234663852886e38


def validate_vector(vec: Any, *, dimensions: int | None = None) -> list[float]:
    """Check a client-supplied embedding and return it as ``list[float]``.

    ``dimensions`` defaults to ``CAIRN_EMBEDDING_DIMENSIONS`` (384). Raises
    :class:`EmbeddingDimensionError` (a ``ValueError``) if ``vec`` is not a flat
    sequence of real numbers of that length, has a NaN/infinite component or one
    too large for a 32-bit float, or is all zeros (which has no direction, so
    cosine distance to it is undefined).
    """
    if dimensions is None:
        dimensions = _int_setting("CAIRN_EMBEDDING_DIMENSIONS", EMBEDDING_DIMENSIONS, minimum=1)
    if isinstance(vec, str | bytes | bytearray | dict) or not (
        isinstance(vec, Sequence) or hasattr(vec, "__array__")
    ):
        raise EmbeddingDimensionError(
            f"embedding must be a list of {dimensions} numbers, got {type(vec).__name__}"
        )
    if getattr(vec, "ndim", 1) != 1:
        raise EmbeddingDimensionError(
            f"embedding must be a flat list of {dimensions} numbers, "
            f"got an array of shape {getattr(vec, 'shape', '?')}"
        )
    items = list(vec)
    if len(items) != dimensions:
        raise EmbeddingDimensionError(
            f"embedding must have {dimensions} dimensions, got {len(items)}"
        )
    out: list[float] = []
    for i, x in enumerate(items):
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise EmbeddingDimensionError(
                f"embedding component {i} must be a number, got {type(x).__name__}"
            )
        f = float(x)
        if not math.isfinite(f):
            raise EmbeddingDimensionError(f"embedding component {i} is not finite ({f})")
        if abs(f) > _FLOAT32_MAX:
            raise EmbeddingDimensionError(
                f"embedding component {i} is too large for a 32-bit float ({f})"
            )
        out.append(f)
    if not any(out):
        raise EmbeddingDimensionError("embedding must not be the zero vector")
    return out
