"""The OpenAI-compatible embedder: ``POST {base_url}/embeddings`` over HTTP."""

from __future__ import annotations

import math
import threading
from typing import Any

from memory.core.embedders import (
    EMBEDDING_DIMENSIONS,
    Embedder,
    EmbeddingBackendError,
    EmbeddingConfigError,
    EmbeddingDimensionError,
    validate_vector,
)

_REQUEST_TIMEOUT = 30.0


class OpenAIEmbedder(Embedder):
    """Embeddings from an OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

    Vectors are checked against ``dimensions`` and L2-normalised.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        dimensions: int = EMBEDDING_DIMENSIONS,
        batch_size: int = 32,
        timeout: float = _REQUEST_TIMEOUT,
    ) -> None:
        if not base_url:
            raise EmbeddingConfigError(
                "CAIRN_EMBEDDING_URL must be set when CAIRN_EMBEDDER is 'openai'"
            )
        if not base_url.startswith(("http://", "https://")):
            raise EmbeddingConfigError(
                f"CAIRN_EMBEDDING_URL must start with http:// or https://, got {base_url!r}"
            )
        if not model:
            raise EmbeddingConfigError(
                "CAIRN_EMBEDDING_MODEL must be set when CAIRN_EMBEDDER is 'openai'"
            )
        if batch_size < 1:
            raise EmbeddingConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model_id = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self._api_key = api_key
        self._timeout = timeout
        self._client: Any = None
        self._client_lock = threading.Lock()

    def _http(self) -> Any:
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    import httpx

                    headers = {"Accept": "application/json"}
                    if self._api_key:
                        headers["Authorization"] = f"Bearer {self._api_key}"
                    self._client = httpx.Client(timeout=self._timeout, headers=headers)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _embed(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._request(texts[start : start + self.batch_size]))
        return out

    def _request(self, texts: list[str]) -> list[list[float]]:
        import httpx

        try:
            response = self._http().post(self.url, json={"model": self.model_id, "input": texts})
        except httpx.HTTPError as exc:
            raise EmbeddingBackendError(
                f"embedding request to {self.url} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if response.status_code != 200:
            raise EmbeddingBackendError(
                f"embedding server {self.url} answered HTTP {response.status_code}: "
                f"{response.text[:300]}"
            )
        try:
            data = response.json()["data"]
            if not isinstance(data, list):
                raise TypeError("'data' is not a list")
            if all(isinstance(d, dict) and isinstance(d.get("index"), int) for d in data):
                data = sorted(data, key=lambda d: d["index"])
            raw = [d["embedding"] for d in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingBackendError(
                f"embedding server {self.url} returned an unexpected body ({exc}): "
                f"{response.text[:300]}"
            ) from None
        if len(raw) != len(texts):
            raise EmbeddingBackendError(
                f"embedding server {self.url} returned {len(raw)} vectors for {len(texts)} texts"
            )
        vectors = []
        for vec in raw:
            try:
                checked = validate_vector(vec, dimensions=self.dimensions)
            except EmbeddingDimensionError as exc:
                raise EmbeddingDimensionError(
                    f"embedding server {self.url} (model {self.model_id!r}) returned a bad "
                    f"vector: {exc}. Cairn expects {self.dimensions}-dimensional vectors "
                    "(CAIRN_EMBEDDING_DIMENSIONS)."
                ) from None
            norm = math.sqrt(math.fsum(x * x for x in checked))
            vectors.append([x / norm for x in checked])
        return vectors
