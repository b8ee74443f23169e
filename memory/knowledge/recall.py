"""Hybrid recall: one SQL statement fusing the HNSW vector walk and full text,
with the exact fallback, and the use counts recall records. Reads only, except
those counts; recall never changes confidence.

Fusion (``CAIRN_RECALL_FUSION``) is by score: the vector list's cosine
similarities scaled min-max, the text list's BM25 scaled by its best, weighted
0.3/0.7, with the text weight scaled by how much of the query that best match
holds (see ``_SCORE_RELEVANCE``). "rrf" is the weighted reciprocal-rank fusion
it replaced, which ranked advice questions' answers (a stated preference sharing
no word with "any tips for dinner?") below every item sharing one word."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, connections, transaction
from django.utils import timezone

from cairn.db_router import read_on_replica
from memory.core.embedders import EmbeddingError, validate_vector
from memory.core.embeddings import get_embedder
from memory.core.provenance import knowledge_provenance
from memory.core.text import WORD
from memory.core.validation import (
    bad_request,
    check_text,
)
from memory.knowledge.bm25 import bm25_ctes, bm25_params
from memory.knowledge.selectors import json_value
from memory.knowledge.text_stats import idf_ctes as stats_idf_ctes
from memory.knowledge.text_stats import scope_ctes as stats_scope_ctes
from memory.knowledge.vector_search import (
    nearest_rows,
    nearest_rows_params,
    plan_for_these_values,
    set_vector_search,
    set_vector_search_for_workspace,
    vector_literal,
)
from memory.models import (
    CONTENT_MAX_CHARS,
    Workspace,
)

logger = logging.getLogger(__name__)


# Words that ask for breadth: history, comparisons, enumerations.
COMPLEX_WORDS = frozenset(
    {
        "compare",
        "comparison",
        "history",
        "all",
        "every",
        "everything",
        "list",
        "across",
        "between",
        "throughout",
        "timeline",
    }
)


# Words that ask for an explanation rather than a single fact.
MEDIUM_WORDS = frozenset({"how", "why", "explain", "describe", "summarize", "summarise"})


SIMPLE_MAX_WORDS = 7


COMPLEX_MIN_WORDS = 21


def recall_default_top_k(query: str) -> int:
    """``top_k`` when the caller gives none, by query complexity (no model call).

    - 10 (complex): more than 20 words, or a breadth word such as "compare",
      "history", "all", "every", "list", "across", "between".
    - 3 (simple): at most 7 words and no "how"/"why"/"explain"/"describe"/"summarize".
    - 5 otherwise.
    """
    words = [w.lower() for w in WORD.findall(query)]
    if len(words) >= COMPLEX_MIN_WORDS or COMPLEX_WORDS.intersection(words):
        return settings.CAIRN_RECALL_TOP_K_COMPLEX
    if len(words) <= SIMPLE_MAX_WORDS and not MEDIUM_WORDS.intersection(words):
        return settings.CAIRN_RECALL_TOP_K_SIMPLE
    return settings.CAIRN_RECALL_TOP_K_DEFAULT


@dataclass(frozen=True)
class RecallHit:
    id: int
    content: str
    category: str
    domain: str
    entity: str
    context: str
    sensitive: bool
    source: str
    confidence: float
    metadata: dict
    due_at: datetime | None
    created_at: datetime
    updated_at: datetime
    observed_at: datetime
    vector_rank: int | None
    text_rank: int | None
    relevance: float
    score: float
    # who put the words there and whether they are earned (memory.core.provenance)
    provenance: dict | None = None


def _tsquery_sql(mode: str) -> str:
    if mode == "or":
        # Any lexeme of the query (stemmed and stop-word-filtered by the english config);
        # ts_rank_cd then ranks rows that cover more of them, closer together, higher.
        return (
            "(SELECT coalesce(string_agg(quote_literal(lx), ' | '), '')::tsquery "
            "FROM unnest(tsvector_to_array(to_tsvector('english', %(text)s))) AS lx)"
        )
    return "websearch_to_tsquery('english', %(text)s)"


_COLUMNS = (
    "k.id, k.content, k.category, k.domain, k.entity, k.context, k.sensitive, k.source, "
    "k.confidence, k.metadata, k.due_at, k.created_at, k.updated_at, k.observed_at, "
    "k.channel, k.sealed"
)


def recall_filters_sql(
    *,
    workspace_id: int,
    context: str | None,
    category: str | None,
    entity: str | None,
    time_from: datetime | None,
    time_to: datetime | None,
    include_sensitive: bool,
) -> tuple[str, dict]:
    """The WHERE clause both candidate lists share, and its parameters."""
    clauses = [
        "k.workspace_id = %(workspace_id)s",
        "k.status = 'active'",
        "k.superseded_by_id IS NULL",
    ]
    params: dict = {"workspace_id": workspace_id}
    if not include_sensitive:
        clauses.append("NOT k.sensitive")
    if context is not None:
        clauses.append("k.context IN (%(context)s, 'global')")
        params["context"] = context
    if category is not None:
        clauses.append("k.category = %(category)s")
        params["category"] = category
    if entity is not None:
        clauses.append("k.entity = %(entity)s")
        params["entity"] = entity
    if time_from is not None:
        clauses.append("k.observed_at >= %(time_from)s")
        params["time_from"] = time_from
    if time_to is not None:
        clauses.append("k.observed_at <= %(time_to)s")
        params["time_to"] = time_to
    return " AND ".join(clauses), params


# idf counts stop here (one GIN look-up per query word, and one count of the scope,
# on every recall): at 100k items, exact counts cost ~0.4 s a query. Past the caps a
# word is simply "common"; scopes below them (a conversation, a project) are exact.
BM25_SCOPE_CAP = 10_000
BM25_DF_CAP = 1_000


def bm25_sql(where: str, *, text_stats: str | None = None) -> str:
    """BM25 CTEs ``m``, ``df`` and ``sc`` over active knowledge (memory/knowledge/bm25.py).

    ``text_stats`` (issue 52: a text half whose cost follows the workspace, not the
    table) reads the workspace's size from its kept statistics
    (memory/knowledge/text_stats.py) and matches a small workspace's rows directly;
    "idf" also takes the idf's counts from them instead of counting the scope and
    each query word's rows on every recall: only when the scope is the whole
    workspace (no context, category, entity or time filter), where the kept counts
    are exactly what the count would find, so the ranking is the same. None counts.
    """
    if text_stats is None:
        return bm25_ctes(table="memory_knowledge", alias="k", where=where)
    if text_stats not in ("scope", "idf", "idf_sensitive"):
        raise ValueError(f"unknown text_stats {text_stats!r}")
    idf = None
    if text_stats != "scope":
        idf = stats_idf_ctes(include_sensitive=text_stats == "idf_sensitive")
    return stats_scope_ctes() + bm25_ctes(
        table="memory_knowledge",
        alias="k",
        where=where,
        idf=idf,
        small="(SELECT small FROM text_scope)",
    )


# Score fusion (CAIRN_RECALL_FUSION="score"): each list's scores scaled to 0..1 (the
# vector side min-max over its candidates, BM25 by the best match), then weighted.
# The text side's weight is scaled by its best match's strength: that match's BM25
# over the query's ideal match (every query lexeme once, at average length: the
# sum of their idfs), from none at CAIRN_RECALL_TEXT_WEAK up to all of it at
# CAIRN_RECALL_TEXT_STRONG. A match on one of four ordinary query words is weak, so
# it cannot outrank the nearest meaning; a match on the rare words is strong.
_SCORE_RELEVANCE = """(
        %(w_vec)s * coalesce(
            (vec.s - (SELECT min(s) FROM vec))
            / nullif((SELECT max(s) FROM vec) - (SELECT min(s) FROM vec), 0), 1)
            * (vec.id IS NOT NULL)::int
      + %(w_text)s * (SELECT g FROM gate)
            * coalesce(txt.s / nullif((SELECT max(s) FROM txt), 0), 0)
    ) / nullif(%(w_vec)s + %(w_text)s, 0)"""

_GATE = """
    gate AS MATERIALIZED (
        SELECT CASE WHEN NOT %(text_gate)s THEN 1.0::float8 ELSE least(1, greatest(0,
            (least(1, coalesce((SELECT max(s) FROM txt)
                               / nullif((SELECT sum(idf) FROM df), 0), 0))
             - %(text_weak)s) / nullif(%(text_strong)s - %(text_weak)s, 0)
        ))::float8 END AS g
    ),"""

_RRF_RELEVANCE = """(coalesce(%(w_vec)s / (%(rrf_k)s + vec.rank), 0)
              + coalesce(%(w_text)s / (%(rrf_k)s + txt.rank), 0)) * %(rrf_norm)s"""


def recall_sql(
    *,
    where: str,
    use_vector: bool,
    use_text: bool,
    text_mode: str,
    fusion: str = "score",
    text_stats: str | None = None,
) -> str:
    """The fused recall statement (see the module docstring).

    The vector side walks the HNSW index, with the exact answer when the walk
    comes back short (see ``nearest_rows``).

    ``fusion``: "score" (the default; see ``_SCORE_RELEVANCE``, text scored by BM25)
    or "rrf" (weighted reciprocal rank, text ranked by ``ts_rank_cd``: the fusion
    before issue 17's advice questions, kept for comparison).

    ``text_stats``: see ``bm25_sql`` (score fusion only).
    """
    if fusion not in ("score", "rrf"):
        raise ValueError(f"unknown recall fusion {fusion!r}")
    if use_vector:
        vec_index, rows = nearest_rows(
            f"""FROM memory_knowledge k
            WHERE {where} AND k.embedding IS NOT NULL
              AND k.embedding_model IN (%(emodel)s, 'client')""",
            "k.embedding <=> %(qvec)s::vector",
        )
        vec = f"""
        SELECT id, (1 - dist)::float8 AS s, row_number() OVER (ORDER BY dist, id) AS rank
        FROM {rows} v"""
    else:
        vec = "SELECT NULL::bigint AS id, NULL::float8 AS s, NULL::bigint AS rank WHERE false"
        vec_index = ""
    scoring = ""
    if use_text and fusion == "score":
        scoring = bm25_sql(where, text_stats=text_stats)
        txt = """
        SELECT id, s, row_number() OVER (ORDER BY s DESC, id) AS rank FROM (
            SELECT id, s FROM sc ORDER BY s DESC, id LIMIT %(n)s
        ) t"""
    elif use_text:
        # Ranking reads every match's tsvector, so at most %(text_cap)s matches are
        # ranked: words common enough to match more than that carry little signal.
        txt = f"""
        SELECT id, r::float8 AS s, row_number() OVER (ORDER BY r DESC, id) AS rank FROM (
            SELECT m.id, ts_rank_cd(m.search_vector, (SELECT q FROM tsq)) AS r
            FROM (
                SELECT k.id, k.search_vector FROM memory_knowledge k
                WHERE {where} AND k.search_vector @@ (SELECT q FROM tsq)
                LIMIT %(text_cap)s
            ) m
            ORDER BY r DESC, m.id
            LIMIT %(n)s
        ) t"""
    else:
        txt = "SELECT NULL::bigint AS id, NULL::float8 AS s, NULL::bigint AS rank WHERE false"
    if fusion == "score":
        relevance = _SCORE_RELEVANCE
        gate = _GATE if use_text else "gate AS (SELECT 1.0::float8 AS g),"
    else:
        relevance, gate = _RRF_RELEVANCE, ""
    return f"""
    WITH tsq AS MATERIALIZED (SELECT {_tsquery_sql(text_mode)} AS q),
    {vec_index}
    vec AS MATERIALIZED ({vec}),
    {scoring}
    txt AS MATERIALIZED ({txt}),
    {gate}
    fused AS (
        SELECT c.id, vec.rank AS vector_rank, txt.rank AS text_rank, {relevance} AS relevance
        FROM (SELECT id FROM vec UNION SELECT id FROM txt) c
        LEFT JOIN vec ON vec.id = c.id
        LEFT JOIN txt ON txt.id = c.id
    )
    SELECT {_COLUMNS}, f.vector_rank, f.text_rank, f.relevance,
           f.relevance + %(w_conf)s * k.confidence AS score
    FROM fused f JOIN memory_knowledge k ON k.id = f.id
    ORDER BY score DESC, k.confidence DESC, k.observed_at DESC, k.id DESC
    LIMIT %(top_k)s
    """


def recall_sql_params(*, w_vec: float, w_text: float, rrf_k: int, text_gate: bool) -> dict:
    """The tuning parameters of ``recall_sql`` (weights, RRF and BM25 constants, the
    text-strength gate); the caller adds the query's and the filters'."""
    return {
        "w_vec": float(w_vec),
        "w_text": float(w_text),
        "rrf_k": rrf_k,
        "rrf_norm": (rrf_k + 1) / (w_vec + w_text) if (w_vec + w_text) > 0 else 0.0,
        "w_conf": float(settings.CAIRN_RECALL_CONFIDENCE_WEIGHT),
        **bm25_params(scope_cap=BM25_SCOPE_CAP, df_cap=BM25_DF_CAP),
        # Without a vector side there is nothing to weigh a weak text match against.
        "text_gate": bool(text_gate),
        "text_weak": float(settings.CAIRN_RECALL_TEXT_WEAK),
        "text_strong": float(settings.CAIRN_RECALL_TEXT_STRONG),
        **nearest_rows_params(),
    }


def candidate_count(top_k: int) -> int:
    """Rows per candidate list: a fixed depth, the same for every ``top_k`` the API
    allows, so the first k results are the same whatever ``top_k`` ≥ k is asked
    (issue 54: the min-max scaling of the vector side, and who is a candidate at
    all, depended on ``top_k`` when the depth grew with it). Only a ``top_k``
    deeper than that (the review UI's longest page) goes deeper."""
    return max(settings.CAIRN_RECALL_CANDIDATE_MIN, top_k)


def knowledge_search(
    *,
    workspace: Workspace,
    query: str,
    query_embedding: list[float] | None,
    top_k: int,
    context: str | None = None,
    category: str | None = None,
    entity: str | None = None,
    time_from: datetime | None = None,
    time_to: datetime | None = None,
    include_sensitive: bool = False,
    vector_weight: float | None = None,
    text_weight: float | None = None,
    rrf_k: int | None = None,
    text_mode: str | None = None,
    fusion: str | None = None,
    candidates: int | None = None,
    ef_search: int | None = None,
) -> list[RecallHit]:
    """Hybrid recall (see the module docstring). Reads only: it does not touch use counts."""
    w_vec = settings.CAIRN_RECALL_VECTOR_WEIGHT if vector_weight is None else vector_weight
    w_text = settings.CAIRN_RECALL_TEXT_WEIGHT if text_weight is None else text_weight
    rrf_k = int(settings.CAIRN_RECALL_RRF_K if rrf_k is None else rrf_k)
    n = candidates or candidate_count(top_k)
    where, params = recall_filters_sql(
        workspace_id=workspace.pk,
        context=context,
        category=category,
        entity=entity,
        time_from=time_from,
        time_to=time_to,
        include_sensitive=include_sensitive,
    )
    use_vector = w_vec > 0 and query_embedding is not None
    use_text = w_text > 0 and bool(query.strip())
    fusion = fusion or settings.CAIRN_RECALL_FUSION
    text_stats = None
    if settings.CAIRN_RECALL_TEXT_STATS:
        # The kept counts are the whole workspace's: they stand for the scope's only
        # when no filter narrows it (sensitivity is kept apart in them).
        whole = context is None and category is None and entity is None
        whole = whole and time_from is None and time_to is None
        text_stats = "scope"
        if whole:
            text_stats = "idf_sensitive" if include_sensitive else "idf"
    sql = recall_sql(
        where=where,
        use_vector=use_vector,
        use_text=use_text,
        text_mode=text_mode or settings.CAIRN_RECALL_TEXT_MODE,
        fusion=fusion,
        text_stats=text_stats,
    )
    if fusion == "score":
        # A missing side weighs nothing: first in the other list is still 1.0.
        w_vec, w_text = (w_vec if use_vector else 0.0), (w_text if use_text else 0.0)
    params.update(
        {
            "qvec": vector_literal(query_embedding) if use_vector else None,
            # Vectors from another embedder are in another space: skip them until
            # the embed_backfill job has re-embedded them.
            "emodel": get_embedder().model_id if use_vector else "",
            "text": query,
            "n": n,
            "top_k": int(top_k),
            **recall_sql_params(w_vec=w_vec, w_text=w_text, rrf_k=rrf_k, text_gate=use_vector),
        }
    )

    def search(alias: str) -> list[tuple]:
        with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
            if use_vector:
                # The walk widens with the workspace (issue 52): see ef_search_for_rows.
                if ef_search:
                    set_vector_search(cursor, ef_search=max(ef_search, n))
                else:
                    set_vector_search_for_workspace(cursor, workspace_id=workspace.pk, floor=n)
            else:
                plan_for_these_values(cursor)
            cursor.execute(sql, params)
            return cursor.fetchall()

    # On the read replica when one is configured and has replayed every write so far
    # (cairn/db_router.py); else, or when it fails, on the primary.
    rows = read_on_replica(search)
    hits = []
    for row in rows:
        (
            id_,
            content,
            category_,
            domain,
            entity_,
            context_,
            sensitive,
            source,
            confidence,
            metadata,
            due_at,
            created_at,
            updated_at,
            observed_at,
            channel,
            sealed,
            vector_rank,
            text_rank,
            relevance,
            score,
        ) = row
        metadata = metadata if isinstance(metadata, dict) else json_value(metadata)
        hits.append(
            RecallHit(
                id=id_,
                content=content,
                category=category_,
                domain=domain,
                entity=entity_,
                context=context_,
                sensitive=sensitive,
                source=source,
                confidence=confidence,
                metadata=metadata,
                due_at=due_at,
                created_at=created_at,
                updated_at=updated_at,
                observed_at=observed_at,
                vector_rank=vector_rank,
                text_rank=text_rank,
                relevance=float(relevance),
                score=float(score),
                provenance=knowledge_provenance(
                    channel=channel,
                    source=source,
                    sealed=sealed,
                    metadata=metadata,
                    confidence=confidence,
                ).as_json(),
            )
        )
    return hits


@dataclass(frozen=True)
class RecallResult:
    top_k: int
    hits: list[RecallHit]


def recall_top_k_and_vector(
    *, query: str, top_k: int | None, embedding: list[float] | None
) -> tuple[int, list[float] | None]:
    """``top_k`` (by query complexity when not given, capped) and the query's vector: the
    client's (checked) or the embedder's; None when the embedder fails, so recall goes
    on with full text only."""
    if top_k is None:
        top_k = recall_default_top_k(query)
    top_k = max(1, min(int(top_k), settings.CAIRN_RECALL_TOP_K_MAX))
    if embedding is not None:
        try:
            return top_k, validate_vector(embedding)
        except ValueError as exc:
            raise bad_request("embedding", str(exc)) from None
    try:
        return top_k, get_embedder().embed_one(query)
    except EmbeddingError:
        logger.exception("query embedding failed; recall falls back to full text only")
        return top_k, None


def knowledge_recall(
    *,
    workspace: Workspace,
    query: str,
    top_k: int | None = None,
    embedding: list[float] | None = None,
    now: datetime | None = None,
    **filters: Any,
) -> RecallResult:
    """Hybrid recall, then mark the results used. ``filters`` are ``knowledge_search``'s
    (context, category, entity, time_from, time_to, include_sensitive).

    Retrieval is not evidence (SPEC principle 1): this refreshes ``last_used_at``
    and ``use_count`` of what it returns and never changes ``confidence``.
    """
    query = check_text("query", query, max_chars=CONTENT_MAX_CHARS, allow_blank=False)
    top_k, vector = recall_top_k_and_vector(query=query, top_k=top_k, embedding=embedding)
    hits = knowledge_search(
        workspace=workspace,
        query=query,
        query_embedding=vector,
        top_k=top_k,
        **filters,
    )
    knowledge_mark_used(workspace=workspace, item_ids=[h.id for h in hits], now=now)
    return RecallResult(top_k=top_k, hits=hits)


_MARK_USED_SQL = """
    WITH free AS (
        SELECT id FROM memory_knowledge
        WHERE workspace_id = %(workspace_id)s AND id = ANY(%(ids)s)
        ORDER BY id
        FOR UPDATE SKIP LOCKED
    )
    UPDATE memory_knowledge k
    SET use_count = k.use_count + 1, last_used_at = %(now)s
    FROM free WHERE k.id = free.id
"""


def knowledge_mark_used(
    *, workspace: Workspace, item_ids: list[int], now: datetime | None = None
) -> int:
    """Refresh recency and the use count. Confidence and updated_at stay as they are.

    Never waits for a row lock, so concurrent recalls with overlapping hits (and
    batch writes holding rows) cannot deadlock with it: rows are taken in id order
    with ``SKIP LOCKED``; a row another transaction holds at that instant is left
    alone (its use is a hint for decay, and the holder is usually another recall
    marking the same row). Returns the number of rows marked.
    """
    if not item_ids:
        return 0
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _MARK_USED_SQL,
            {
                "workspace_id": workspace.pk,
                "ids": sorted({int(i) for i in item_ids}),
                "now": now or timezone.now(),
            },
        )
        return cursor.rowcount
