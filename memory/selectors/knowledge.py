"""Reading the knowledge store: get, list and hybrid recall (SPEC section 3).

Recall is one SQL statement (after two ``set_config`` calls that scope the HNSW
search parameters to the transaction):

1. ``vec``: the nearest rows by cosine distance, ``ORDER BY embedding <=> q LIMIT n``,
   answered by the HNSW index. pgvector 0.8 iterative scans
   (``hnsw.iterative_scan = relaxed_order``) keep scanning the graph until ``n``
   rows pass the filters, so a tight filter does not starve the list; the CTE
   re-sorts by exact distance because relaxed order may be slightly out of order.
2. ``txt``: full-text matches ``search_vector @@ tsquery`` ranked by ``ts_rank_cd``,
   answered by the GIN index.
3. Reciprocal-rank fusion ``w_vec/(K+rank_vec) + w_text/(K+rank_text)`` over the
   union. ``relevance`` is that sum scaled by ``(K+1)/(w_vec+w_text)``, so rank 1 in
   both lists is 1.0 (a constant factor: the order by relevance is the spec's).
   ``score = relevance + 0.05 × confidence``. Unscaled, RRF sums never exceed
   1/61 ≈ 0.016 and 0.05 × confidence would outweigh relevance; scaled, strength
   can only reorder items whose relevance is within 0.05 of each other, which is
   what "strength is a tiebreaker only" asks for.

Both lists see the same filters: workspace, active and not superseded, context
(plus ``global``), category, entity, created_at range, sensitive only on request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib.postgres.search import SearchQuery
from django.db import connection, transaction
from django.db.models import QuerySet

from cairn.errors import NotFoundError
from memory.embeddings import get_embedder
from memory.models import ConfidenceChange, Knowledge, KnowledgeStatus, TargetType, Workspace

# --------------------------------------------------------------------------- get / list


def knowledge_get(*, workspace: Workspace, item_id: int) -> Knowledge:
    """One item of this workspace, whatever its status; 404 for other workspaces' ids."""
    item = Knowledge.objects.filter(workspace=workspace, pk=item_id).first()
    if item is None:
        raise NotFoundError(f"No knowledge item {item_id}.", fields={"id": ["not found"]})
    return item


@dataclass(frozen=True)
class Page:
    items: list
    count: int
    limit: int
    offset: int

    @property
    def next_offset(self) -> int | None:
        following = self.offset + len(self.items)
        return following if following < self.count else None


def knowledge_list(
    *,
    workspace: Workspace,
    category: str | None = None,
    context: str | None = None,
    entity: str | None = None,
    domain: str | None = None,
    status: str = KnowledgeStatus.ACTIVE,
    q: str | None = None,
    include_sensitive: bool = False,
    include_superseded: bool = False,
    due_before: datetime | None = None,
    due_after: datetime | None = None,
    created_from: datetime | None = None,
    created_to: datetime | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> Page:
    """A page of items, newest first. ``status`` is ``active``, ``archived`` or ``all``."""
    qs = knowledge_filter(
        workspace=workspace,
        category=category,
        context=context,
        entity=entity,
        domain=domain,
        status=status,
        q=q,
        include_sensitive=include_sensitive,
        include_superseded=include_superseded,
        due_before=due_before,
        due_after=due_after,
        created_from=created_from,
        created_to=created_to,
    )
    limit = page_size(limit)
    items = list(qs.order_by("-created_at", "-id").defer("embedding")[offset : offset + limit])
    count = qs.count() if (items or offset) else 0
    return Page(items=items, count=count, limit=limit, offset=offset)


def knowledge_filter(
    *,
    workspace: Workspace,
    category: str | None = None,
    context: str | None = None,
    entity: str | None = None,
    domain: str | None = None,
    status: str = KnowledgeStatus.ACTIVE,
    q: str | None = None,
    include_sensitive: bool = False,
    include_superseded: bool = False,
    due_before: datetime | None = None,
    due_after: datetime | None = None,
    created_from: datetime | None = None,
    created_to: datetime | None = None,
) -> QuerySet[Knowledge]:
    qs = Knowledge.objects.filter(workspace=workspace)
    if status != "all":
        qs = qs.filter(status=status)
    if not include_superseded:
        qs = qs.filter(superseded_by__isnull=True)
    if not include_sensitive:
        qs = qs.filter(sensitive=False)
    for field, value in (
        ("category", category),
        ("context", context),
        ("entity", entity),
        ("domain", domain),
    ):
        if value is not None:
            qs = qs.filter(**{field: value})
    if q:
        qs = qs.filter(search_vector=SearchQuery(q, config="english", search_type="websearch"))
    if due_before is not None:
        qs = qs.filter(due_at__lte=due_before)
    if due_after is not None:
        qs = qs.filter(due_at__gte=due_after)
    if created_from is not None:
        qs = qs.filter(created_at__gte=created_from)
    if created_to is not None:
        qs = qs.filter(created_at__lte=created_to)
    return qs


def page_size(limit: int | None) -> int:
    if limit is None:
        return settings.CAIRN_LIST_PAGE_SIZE
    return max(1, min(int(limit), settings.CAIRN_LIST_PAGE_SIZE_MAX))


# --------------------------------------------------------------------------- recall

_WORD = re.compile(r"\w+", re.UNICODE)
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
    words = [w.lower() for w in _WORD.findall(query)]
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
    vector_rank: int | None
    text_rank: int | None
    relevance: float
    score: float


def vector_literal(vector) -> str:
    """pgvector's text form, for a ``%s::vector`` parameter."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def set_vector_search(cursor, *, ef_search: int, iterative_scan: str | None = None) -> None:
    """Scope HNSW search parameters to the current transaction (``SET LOCAL``)."""
    cursor.execute(
        "SELECT set_config('hnsw.ef_search', %s, true), "
        "set_config('hnsw.iterative_scan', %s, true), "
        "set_config('hnsw.max_scan_tuples', %s, true)",
        [
            str(int(ef_search)),
            iterative_scan or settings.CAIRN_RECALL_ITERATIVE_SCAN,
            str(int(settings.CAIRN_RECALL_MAX_SCAN_TUPLES)),
        ],
    )


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
    "k.confidence, k.metadata, k.due_at, k.created_at, k.updated_at"
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
        clauses.append("k.created_at >= %(time_from)s")
        params["time_from"] = time_from
    if time_to is not None:
        clauses.append("k.created_at <= %(time_to)s")
        params["time_to"] = time_to
    return " AND ".join(clauses), params


def recall_sql(*, where: str, use_vector: bool, use_text: bool, text_mode: str) -> str:
    """The fused recall statement (see the module docstring).

    The vector side walks the HNSW index; if that walk comes back empty for a
    scope that has vectors (its ef_search candidates all filtered out, or a graph
    full of deleted rows after a large erasure, not yet vacuumed), the same
    statement answers the scope exactly instead: ordered by an expression the
    index cannot serve, read through the btree filters. The uncorrelated
    NOT EXISTS is a one-time filter, so the exact scan runs only then.
    """
    if use_vector:

        def nearest(order: str, extra: str = "") -> str:
            return f"""
            SELECT k.id, k.embedding <=> %(qvec)s::vector AS dist
            FROM memory_knowledge k
            WHERE {where} AND k.embedding IS NOT NULL
              AND k.embedding_model IN (%(emodel)s, 'client'){extra}
            ORDER BY {order}
            LIMIT %(n)s"""

        vec = f"""
        SELECT id, row_number() OVER (ORDER BY dist, id) AS rank FROM (
            SELECT * FROM vec_index
            UNION ALL
            SELECT * FROM ({
            nearest(
                "(k.embedding <=> %(qvec)s::vector) + 0",
                " AND NOT EXISTS (SELECT 1 FROM vec_index)",
            )
        }) exact
        ) v"""
        vec_index = f"vec_index AS MATERIALIZED ({nearest('k.embedding <=> %(qvec)s::vector')}),"
    else:
        vec = "SELECT NULL::bigint AS id, NULL::bigint AS rank WHERE false"
        vec_index = ""
    if use_text:
        # Ranking reads every match's tsvector, so at most %(text_cap)s matches are
        # ranked: words common enough to match more than that carry little signal.
        txt = f"""
        SELECT id, row_number() OVER (ORDER BY r DESC, id) AS rank FROM (
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
        txt = "SELECT NULL::bigint AS id, NULL::bigint AS rank WHERE false"
    return f"""
    WITH tsq AS MATERIALIZED (SELECT {_tsquery_sql(text_mode)} AS q),
    {vec_index}
    vec AS MATERIALIZED ({vec}),
    txt AS MATERIALIZED ({txt}),
    fused AS (
        SELECT c.id, vec.rank AS vector_rank, txt.rank AS text_rank,
               (coalesce(%(w_vec)s / (%(rrf_k)s + vec.rank), 0)
              + coalesce(%(w_text)s / (%(rrf_k)s + txt.rank), 0)) * %(rrf_norm)s AS relevance
        FROM (SELECT id FROM vec UNION SELECT id FROM txt) c
        LEFT JOIN vec ON vec.id = c.id
        LEFT JOIN txt ON txt.id = c.id
    )
    SELECT {_COLUMNS}, f.vector_rank, f.text_rank, f.relevance,
           f.relevance + %(w_conf)s * k.confidence AS score
    FROM fused f JOIN memory_knowledge k ON k.id = f.id
    ORDER BY score DESC, k.confidence DESC, k.id DESC
    LIMIT %(top_k)s
    """


def candidate_count(top_k: int) -> int:
    return max(top_k * settings.CAIRN_RECALL_CANDIDATE_FACTOR, settings.CAIRN_RECALL_CANDIDATE_MIN)


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
    sql = recall_sql(
        where=where,
        use_vector=use_vector,
        use_text=use_text,
        text_mode=text_mode or settings.CAIRN_RECALL_TEXT_MODE,
    )
    params.update(
        {
            "qvec": vector_literal(query_embedding) if use_vector else None,
            # Vectors from another embedder are in another space: skip them until
            # the embed_backfill job has re-embedded them.
            "emodel": get_embedder().model_id if use_vector else "",
            "text": query,
            "n": n,
            "w_vec": float(w_vec),
            "w_text": float(w_text),
            "rrf_k": rrf_k,
            "rrf_norm": (rrf_k + 1) / (w_vec + w_text) if (w_vec + w_text) > 0 else 0.0,
            "w_conf": float(settings.CAIRN_RECALL_CONFIDENCE_WEIGHT),
            "top_k": int(top_k),
            "text_cap": int(settings.CAIRN_RECALL_TEXT_MATCH_CAP),
        }
    )
    with transaction.atomic(), connection.cursor() as cursor:
        if use_vector:
            set_vector_search(
                cursor, ef_search=max(ef_search or settings.CAIRN_RECALL_EF_SEARCH, n)
            )
        cursor.execute(sql, params)
        rows = cursor.fetchall()
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
            vector_rank,
            text_rank,
            relevance,
            score,
        ) = row
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
                metadata=metadata if isinstance(metadata, dict) else _json(metadata),
                due_at=due_at,
                created_at=created_at,
                updated_at=updated_at,
                vector_rank=vector_rank,
                text_rank=text_rank,
                relevance=float(relevance),
                score=float(score),
            )
        )
    return hits


def _json(value):
    import json

    return json.loads(value) if isinstance(value, str) else (value or {})


# --------------------------------------------------------------------------- the review UI

KNOWLEDGE_ORDER = ("-created_at", "-id")


def knowledge_browse(
    *,
    workspace: Workspace,
    category: str | None = None,
    context: str | None = None,
    entity: str | None = None,
    status: str = KnowledgeStatus.ACTIVE,
    q: str | None = None,
    include_sensitive: bool = False,
) -> QuerySet[Knowledge]:
    """The browser's list: current versions, filtered like ``knowledge_list``, without the
    vectors. The caller pages it (keyset, ``KNOWLEDGE_ORDER``); nothing here marks use."""
    return knowledge_filter(
        workspace=workspace,
        category=category,
        context=context,
        entity=entity,
        status=status,
        q=q,
        include_sensitive=include_sensitive,
    ).defer("embedding", "search_vector")


def knowledge_lineage(*, item: Knowledge) -> list[Knowledge]:
    """The item's versions, oldest first: every row superseded into its current version,
    and that current version (a few queries per generation; lineages are short)."""
    head, seen = item, {item.pk}
    while head.superseded_by_id is not None and head.superseded_by_id not in seen:
        seen.add(head.superseded_by_id)
        head = Knowledge.objects.defer("embedding", "search_vector").get(pk=head.superseded_by_id)
    rows, frontier = {head.pk: head}, [head.pk]
    while frontier:
        found = list(
            Knowledge.objects.filter(superseded_by_id__in=frontier)
            .exclude(pk__in=rows)
            .defer("embedding", "search_vector")
        )
        rows.update((row.pk, row) for row in found)
        frontier = [row.pk for row in found]
    return sorted(rows.values(), key=lambda row: (row.created_at, row.pk))


def knowledge_ledger(*, item_ids: list[int]) -> dict[int, list[ConfidenceChange]]:
    """Each item's confidence changes ("strength"), oldest first."""
    changes: dict[int, list[ConfidenceChange]] = {pk: [] for pk in item_ids}
    for change in ConfidenceChange.objects.filter(
        target_type=TargetType.KNOWLEDGE, target_id__in=item_ids
    ).order_by("at", "id"):
        changes[change.target_id].append(change)
    return changes
