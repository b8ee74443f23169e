"""The optional reranker: an OpenAI-compatible ``POST {CAIRN_RERANK_URL}/rerank``.

Request ``{"model", "query", "documents": [...], "top_n"}``; answer
``{"results": [{"index": i, "relevance_score": s}, ...]}`` (the shape served by
Jina, Cohere-compatible gateways, vLLM and llama.cpp's server). Nothing is
downloaded: without ``CAIRN_RERANK_URL`` there is no reranking, and any failure
(unreachable, timeout, bad answer) leaves the fused order as it was.
"""

from __future__ import annotations

import logging

from django.conf import settings

logger = logging.getLogger(__name__)


def rerank_scores(query: str, documents: list[str]) -> list[float] | None:
    """One score per document (higher is better), or None when the reranker fails."""
    url = settings.CAIRN_RERANK_URL
    if not url or not documents:
        return None
    import httpx

    headers = {"Accept": "application/json"}
    if settings.CAIRN_RERANK_API_KEY:
        headers["Authorization"] = f"Bearer {settings.CAIRN_RERANK_API_KEY}"
    try:
        response = httpx.post(
            url.rstrip("/") + "/rerank",
            json={
                "model": settings.CAIRN_RERANK_MODEL,
                "query": query,
                "documents": documents,
                "top_n": len(documents),
            },
            headers=headers,
            timeout=settings.CAIRN_RERANK_TIMEOUT_S,
        )
        response.raise_for_status()
        scores: list[float | None] = [None] * len(documents)
        for row in response.json()["results"]:
            index = int(row["index"])
            if not 0 <= index < len(documents):
                raise ValueError(f"index {index} out of range")
            scores[index] = float(row["relevance_score"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        logger.warning("reranker at %s failed (%s); keeping the fused order", url, exc)
        return None
    low = min((s for s in scores if s is not None), default=0.0)
    # Documents the reranker left out (top_n honoured loosely) go after the rest.
    return [low - 1.0 if s is None else s for s in scores]
