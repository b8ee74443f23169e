"""Recall over knowledge, conversation turns or both (``/recall/`` with ``sources``).

One query embedding serves both stores. Each store answers with its own fused
ranking (knowledge: memory/knowledge/recall.py; turns: memory/knowledge/turn_search.py),
both on one scale (``relevance`` 1.0 = first in both of its lists), so the two
lists merge by score into one ranking: a knowledge item's score is its relevance
plus 0.05 × confidence, a turn's its relevance. Only knowledge items get their
use counts refreshed.

A period the query names ("yesterday", "10 days ago", "in March 2023"), read at
``as_of`` (memory/knowledge/time_words.py), lifts the turns said and the items
observed within it by ``CAIRN_TURN_TIME_BOOST``: a soft window, never a filter. For
knowledge the lift re-orders the best ``CAIRN_RECALL_TOP_K_MAX`` items, a fixed
prefix of its ranking, so any ``top_k`` gives the first rows of a larger one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from memory.core.validation import bad_request, check_text
from memory.knowledge.recall import (
    RecallHit,
    knowledge_mark_used,
    knowledge_search,
    recall_top_k_and_vector,
)
from memory.knowledge.time_words import TimeWindow, query_time_window
from memory.knowledge.turn_search import TurnHit, turn_search
from memory.models import CONTENT_MAX_CHARS, Workspace

SOURCES = ("knowledge", "turns", "both")


@dataclass(frozen=True)
class MixedHit:
    kind: str  # "knowledge" | "turn"
    hit: RecallHit | TurnHit
    score: float


@dataclass(frozen=True)
class MixedRecallResult:
    top_k: int
    hits: list[MixedHit]
    window: TimeWindow | None = None


def recall_sources(
    *,
    workspace: Workspace,
    query: str,
    sources: str,
    top_k: int | None = None,
    embedding: list[float] | None = None,
    context: str | None = None,
    category: str | None = None,
    entity: str | None = None,
    time_from: datetime | None = None,
    time_to: datetime | None = None,
    include_sensitive: bool = False,
    now: datetime | None = None,
    as_of: datetime | None = None,
    record: bool = True,
) -> MixedRecallResult:
    """Recall from ``sources`` (knowledge, turns or both), one ranked list. ``record``:
    mark the knowledge items returned as used (an incognito read records nothing).
    ``as_of``: when the question is asked (default now), for the words about time."""
    if sources not in SOURCES:
        raise bad_request("sources", f"must be one of {', '.join(SOURCES)}")
    query = check_text("query", query, max_chars=CONTENT_MAX_CHARS, allow_blank=False)
    if sources != "knowledge":
        for name, value in (("category", category), ("entity", entity)):
            if value is not None:
                raise bad_request(name, "filters knowledge items only; use sources=knowledge")
    top_k, vector = recall_top_k_and_vector(query=query, top_k=top_k, embedding=embedding)
    window = query_time_window(query, now=as_of or now or timezone.now())
    lift = float(settings.CAIRN_TURN_TIME_BOOST) if window else 0.0
    hits: list[MixedHit] = []
    if sources in ("knowledge", "both"):
        found = knowledge_search(
            workspace=workspace,
            query=query,
            query_embedding=vector,
            top_k=settings.CAIRN_RECALL_TOP_K_MAX if lift else top_k,
            context=context,
            category=category,
            entity=entity,
            time_from=time_from,
            time_to=time_to,
            include_sensitive=include_sensitive,
        )
        ranked = [
            MixedHit(
                kind="knowledge",
                hit=hit,
                score=hit.score
                + (lift if window and window.start <= hit.observed_at < window.end else 0.0),
            )
            for hit in found
        ]
        ranked.sort(key=lambda h: -h.score)  # stable: the store's order within equal scores
        hits += ranked[:top_k]
    if sources in ("turns", "both"):
        found = turn_search(
            workspace=workspace,
            query=query,
            query_embedding=vector,
            top_k=top_k,
            context=context,
            context_or_global=True,
            time_from=time_from,
            time_to=time_to,
            as_of=as_of or now,
        )
        # A reranker may have reordered the turns: they keep its order, on the scale
        # of the fused relevances (turn_search gives each its ``score``).
        for hit in found.hits:
            hits.append(MixedHit(kind="turn", hit=hit, score=hit.score))
    # Stable: within equal scores, the order each store gave stands.
    hits.sort(key=lambda h: -h.score)
    hits = hits[:top_k]
    if record:
        knowledge_mark_used(
            workspace=workspace,
            item_ids=[h.hit.id for h in hits if h.kind == "knowledge"],
            now=now,
        )
    return MixedRecallResult(top_k=top_k, hits=hits, window=window)
