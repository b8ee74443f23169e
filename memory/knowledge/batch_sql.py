"""The statements of a batch remember (``batch.py``): every item's dedup candidates
in one statement, and every new row in one INSERT.

Both take the batch as columns (one array a field, ``unnest`` on the server), so a
batch of 100 costs two statements whatever its size; the vectors travel as one
binary ``vector[]`` (``vector_search.vectors_param``), never as text.
"""

from __future__ import annotations

import json
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.utils import timezone

from memory.knowledge.dedup import Candidate
from memory.knowledge.prepared import Prepared
from memory.knowledge.selectors import json_value
from memory.knowledge.vector_search import set_vector_search, vectors_param
from memory.models import Knowledge, KnowledgeStatus, Workspace

_SCOPE = """k.workspace_id = %(workspace_id)s AND k.category = {q}.category
    AND k.context = {q}.context AND k.entity = {q}.entity
    AND k.status = 'active' AND k.superseded_by_id IS NULL"""

# Each scope of the batch is read exactly (every row's distance, no index walk)
# when it holds fewer than CAIRN_RECALL_EXACT_BELOW rows, as a single search reads
# a small scope (vector_search.nearest_rows): one hash join for the whole batch
# instead of one HNSW walk an item, and the true nearest rows. A larger scope is
# walked through the HNSW index, an item at a time (LATERAL).
_CANDIDATES_SQL = f"""
    WITH q AS MATERIALIZED (
        SELECT * FROM unnest(%(idx)s::int[], %(category)s::text[], %(context)s::text[],
                             %(entity)s::text[], %(vec)s::vector[])
             AS q(i, category, context, entity, vec)
    ),
    scopes AS MATERIALIZED (
        SELECT d.category, d.context, d.entity,
               (SELECT count(*) FROM (
                    SELECT 1 FROM memory_knowledge k WHERE {_SCOPE.format(q="d")}
                    LIMIT %(exact_below)s) s) < %(exact_below)s AS small
        FROM (SELECT DISTINCT category, context, entity FROM q) d
    ),
    hits AS (
        SELECT i, id, sim FROM (
            SELECT q.i, k.id, 1 - (k.embedding <=> q.vec) AS sim,
                   row_number() OVER (PARTITION BY q.i ORDER BY k.embedding <=> q.vec, k.id)
                       AS rank
            FROM q JOIN scopes USING (category, context, entity)
            JOIN memory_knowledge k ON {_SCOPE.format(q="q")}
            WHERE scopes.small AND k.embedding IS NOT NULL AND k.embedding_model = %(emodel)s
              AND 1 - (k.embedding <=> q.vec) >= %(min_sim)s
        ) exact
        WHERE rank <= %(cap)s
        UNION ALL
        SELECT q.i, c.id, c.sim
        FROM q JOIN scopes USING (category, context, entity)
        CROSS JOIN LATERAL (
            SELECT k.id, 1 - (k.embedding <=> q.vec) AS sim
            FROM memory_knowledge k
            WHERE {_SCOPE.format(q="q")}
              AND k.embedding IS NOT NULL AND k.embedding_model = %(emodel)s
            ORDER BY k.embedding <=> q.vec
            LIMIT %(cap)s
        ) c
        WHERE NOT scopes.small AND c.sim >= %(min_sim)s
    )
    SELECT h.i, k.id, k.content, k.category, k.sealed, k.pinned, k.metadata, h.sim
    FROM hits h JOIN memory_knowledge k ON k.id = h.id
    ORDER BY h.i, h.sim DESC, k.id
"""


def batch_candidates(workspace: Workspace, prepared: list[Prepared]) -> dict[int, list[Candidate]]:
    """{item index: its stored dedup candidates}: the rows of its scope with a vector
    of the same model at least CAIRN_DEDUP_MIN_SIMILARITY close, the nearest
    CAIRN_DEDUP_CANDIDATES of them, nearest first."""
    params = {
        "idx": list(range(len(prepared))),
        "category": [p.category for p in prepared],
        "context": [p.context for p in prepared],
        "entity": [p.entity for p in prepared],
        "workspace_id": workspace.pk,
        "emodel": prepared[0].embedding_model,
        "cap": settings.CAIRN_DEDUP_CANDIDATES,
        "min_sim": settings.CAIRN_DEDUP_MIN_SIMILARITY,
        "exact_below": int(settings.CAIRN_RECALL_EXACT_BELOW),
    }
    out: dict[int, list[Candidate]] = {}
    with connection.cursor() as cursor:
        set_vector_search(
            cursor, ef_search=max(settings.CAIRN_RECALL_EF_SEARCH, settings.CAIRN_DEDUP_CANDIDATES)
        )
        params["vec"] = vectors_param(cursor, [p.embedding for p in prepared])
        cursor.execute(_CANDIDATES_SQL, params)
        for i, pk, content, category, sealed, pinned, metadata, sim in cursor.fetchall():
            out.setdefault(i, []).append(
                Candidate(
                    pk, content, category, sealed, pinned, json_value(metadata) or {}, float(sim)
                )
            )
    return out


# Every column a new row sets; the others (last_used_at, reminded_at,
# superseded_by_id, archived_at) start NULL, and search_vector is generated.
_INSERT_SQL = """
    INSERT INTO memory_knowledge (
        workspace_id, agent_id, channel, content, category, domain, entity, context,
        sensitive, source, confidence, use_count, metadata, due_at, operation_key,
        pinned, sealed, status, embedding, embedding_model, created_at, observed_at,
        updated_at
    )
    SELECT r.workspace_id, r.agent_id, r.channel, r.content, r.category, r.domain,
           r.entity, r.context, r.sensitive, r.source, r.confidence, 0, r.metadata::jsonb,
           r.due_at, r.operation_key, r.pinned, r.sealed, %(status)s, r.embedding,
           r.embedding_model, %(now)s, r.observed_at, %(now)s
    FROM unnest(
        %(workspace_id)s::bigint[], %(agent_id)s::bigint[], %(channel)s::text[],
        %(content)s::text[], %(category)s::text[], %(domain)s::text[], %(entity)s::text[],
        %(context)s::text[], %(sensitive)s::boolean[], %(source)s::text[],
        %(confidence)s::float8[], %(metadata)s::text[], %(due_at)s::timestamptz[],
        %(operation_key)s::text[], %(pinned)s::boolean[], %(sealed)s::boolean[],
        %(embedding)s::vector[], %(embedding_model)s::text[], %(observed_at)s::timestamptz[]
    ) WITH ORDINALITY AS r(
        workspace_id, agent_id, channel, content, category, domain, entity, context,
        sensitive, source, confidence, metadata, due_at, operation_key, pinned, sealed,
        embedding, embedding_model, observed_at, ord
    )
    ORDER BY r.ord
    RETURNING id
"""


def insert_new(rows: list[Knowledge], observed_at: list[datetime | None]) -> None:
    """Insert unsaved rows (``remember.new_item``, merges applied) in one statement,
    in order, and give each its id, as ``bulk_create`` would.

    ``observed_at`` is the time each writer gave (None: none given). Rows inserted
    together share one ``created_at`` (and ``observed_at`` when the writer gave
    none): they arrived in one request.
    """
    if not rows:
        return
    now = timezone.now()
    params = {
        "status": KnowledgeStatus.ACTIVE,
        "now": now,
        "workspace_id": [r.workspace_id for r in rows],
        "agent_id": [r.agent_id for r in rows],
        "channel": [r.channel for r in rows],
        "content": [r.content for r in rows],
        "category": [r.category for r in rows],
        "domain": [r.domain for r in rows],
        "entity": [r.entity for r in rows],
        "context": [r.context for r in rows],
        "sensitive": [bool(r.sensitive) for r in rows],
        "source": [r.source for r in rows],
        "confidence": [float(r.confidence) for r in rows],
        "metadata": [json.dumps(r.metadata) for r in rows],
        "due_at": [r.due_at for r in rows],
        "operation_key": [r.operation_key for r in rows],
        "pinned": [bool(r.pinned) for r in rows],
        "sealed": [bool(r.sealed) for r in rows],
        "embedding_model": [r.embedding_model for r in rows],
        "observed_at": [given or now for given in observed_at],
    }
    with connection.cursor() as cursor:
        params["embedding"] = vectors_param(cursor, [r.embedding for r in rows])
        cursor.execute(_INSERT_SQL, params)
        ids = [row[0] for row in cursor.fetchall()]
    for row, pk, given in zip(rows, ids, observed_at, strict=True):
        row.pk = pk
        row.created_at = row.updated_at = now
        row.observed_at = given or now
        row.status = KnowledgeStatus.ACTIVE
        row._state.adding = False
        row._state.db = connection.alias
