"""Remembering a batch at the speed of the embedder (``POST /knowledge/batch/``).

One model call embeds the batch; the dedup scopes are locked in one statement (in
key order, so two batches cannot deadlock); one statement reads every item's dedup
candidates (a LATERAL walk of the HNSW index per item, with the distance cut-off
that the dedup rules imply); Python applies the dedup rules (dedup.py) against
those rows and the batch's own earlier items; the merge targets are locked in id
order; then one INSERT adds the new rows and one UPDATE writes the merged ones.

Batches holding an error item with an ``operation_key``, or items without a vector
(the embedder was down), take the item-by-item path, which handles those cases.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.core.validation import bad_request, prefix_fields
from memory.knowledge.dedup import (
    Candidate,
    content_words,
    is_restatement,
    is_turn,
    normalised_words,
    overlap_coefficient,
)
from memory.knowledge.prepared import Prepared
from memory.knowledge.remember import (
    MERGE_FIELDS,
    RememberResult,
    knowledge_store,
    merge_into,
    new_item,
    scope_digest,
)
from memory.knowledge.selectors import json_value
from memory.knowledge.validation import embed_missing, knowledge_prepare
from memory.knowledge.vector_search import set_vector_search, vector_literal
from memory.models import PRIVILEGED_CATEGORIES, Category, Knowledge, Workspace

_CANDIDATES_SQL = """
    SELECT q.i, c.id, c.content, c.category, c.sealed, c.pinned, c.metadata, c.sim
    FROM unnest(%(idx)s::int[], %(category)s::text[], %(context)s::text[],
                %(entity)s::text[], %(vec)s::text[]::vector[])
         AS q(i, category, context, entity, vec)
    CROSS JOIN LATERAL (
        SELECT k.id, k.content, k.category, k.sealed, k.pinned, k.metadata,
               1 - (k.embedding <=> q.vec) AS sim
        FROM memory_knowledge k
        WHERE k.workspace_id = %(workspace_id)s AND k.category = q.category
          AND k.context = q.context AND k.entity = q.entity
          AND k.status = 'active' AND k.superseded_by_id IS NULL
          AND k.embedding IS NOT NULL AND k.embedding_model = %(emodel)s
        ORDER BY k.embedding <=> q.vec
        LIMIT %(cap)s
    ) c
    WHERE c.sim >= %(min_sim)s
"""


def _candidates(workspace: Workspace, prepared: list[Prepared]) -> dict[int, list[Candidate]]:
    """Every item's stored dedup candidates, in one statement."""
    model = prepared[0].embedding_model
    params = {
        "idx": list(range(len(prepared))),
        "category": [p.category for p in prepared],
        "context": [p.context for p in prepared],
        "entity": [p.entity for p in prepared],
        "vec": [vector_literal(p.embedding) for p in prepared],
        "workspace_id": workspace.pk,
        "emodel": model,
        "cap": settings.CAIRN_DEDUP_CANDIDATES,
        "min_sim": settings.CAIRN_DEDUP_MIN_SIMILARITY,
    }
    out: dict[int, list[Candidate]] = {}
    with connection.cursor() as cursor:
        set_vector_search(
            cursor, ef_search=max(settings.CAIRN_RECALL_EF_SEARCH, settings.CAIRN_DEDUP_CANDIDATES)
        )
        cursor.execute(_CANDIDATES_SQL, params)
        for i, pk, content, category, sealed, pinned, metadata, sim in cursor.fetchall():
            out.setdefault(i, []).append(
                Candidate(
                    pk, content, category, sealed, pinned, json_value(metadata) or {}, float(sim)
                )
            )
    return out


def _unit(vector) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


def _store_many(
    workspace: Workspace, prepared: list[Prepared], actor: Actor
) -> list[RememberResult]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(k)) FROM unnest(%s::bigint[]) AS k",
            [sorted({scope_digest(workspace, p) for p in prepared})],
        )
    candidates = _candidates(workspace, prepared)
    units = [_unit(p.embedding) for p in prepared]
    min_sim = settings.CAIRN_DEDUP_MIN_SIMILARITY
    # Per item: ("db", pk, overlap) | ("batch", j, overlap) | ("new",)
    plan: list[tuple] = []
    texts: dict[tuple[str, Any], tuple[str, frozenset[str]]] = {}  # current wording
    for i, p in enumerate(prepared):
        best: tuple[float, int, tuple] | None = None
        if not is_turn(p.metadata):
            for row in candidates.get(i, []):
                if not actor.is_person and (
                    row.sealed or row.pinned or row.category in PRIVILEGED_CATEGORIES
                ):
                    continue
                if is_turn(row.metadata):
                    continue
                content, words = texts.get(("db", row.pk)) or (
                    row.content,
                    normalised_words(row.content),
                )
                score = overlap_coefficient(p.words, words)
                if score > settings.CAIRN_DEDUP_OVERLAP and is_restatement(
                    p.content, p.words, content, words
                ):
                    key = (score, -row.pk, ("db", row.pk, score))
                    if best is None or key[:2] > best[:2]:
                        best = key
            for j in range(i):
                q = prepared[j]
                if plan[j][0] != "new" or is_turn(q.metadata):
                    continue
                if (q.category, q.context, q.entity) != (p.category, p.context, p.entity):
                    continue
                if float(units[i] @ units[j]) < min_sim:
                    continue
                content, words = texts.get(("batch", j)) or (q.content, q.words)
                score = overlap_coefficient(p.words, words)
                if score > settings.CAIRN_DEDUP_OVERLAP and is_restatement(
                    p.content, p.words, content, words
                ):
                    # Batch items are newer than every stored row: stored rows win ties.
                    key = (score, -(10**18 + j), ("batch", j, score))
                    if best is None or key[:2] > best[:2]:
                        best = key
        if best is None:
            plan.append(("new",))
            continue
        target = best[2]
        plan.append(target)
        # What the target says after this merge (the fuller wording is kept).
        content, words = texts.get(target[:2]) or (
            (prepared[target[1]].content, prepared[target[1]].words)
            if target[0] == "batch"
            else next(
                (r.content, normalised_words(r.content)) for r in candidates[i] if r.pk == target[1]
            )
        )
        if content_words(p.words) >= content_words(words):
            content, words = p.content, p.words
        texts[target[:2]] = (content, words)
    # Lock and load the stored rows that take merges, in id order.
    merge_pks = sorted({t[1] for t in plan if t[0] == "db"})
    rows = {
        row.pk: row
        for row in Knowledge.objects.select_for_update().filter(pk__in=merge_pks).order_by("pk")
    }
    new_rows: dict[int, Knowledge] = {}
    for i, p in enumerate(prepared):
        target = plan[i]
        if target[0] == "new":
            new_rows[i] = new_item(workspace, p, actor)
        elif target[0] == "batch":
            merge_into(new_rows[target[1]], p)
        else:
            merge_into(rows[target[1]], p)
    Knowledge.objects.bulk_create(list(new_rows.values()))
    if rows:
        now = timezone.now()
        for row in rows.values():
            row.updated_at = now
        Knowledge.objects.bulk_update(list(rows.values()), list(MERGE_FIELDS))
    results = []
    for i in range(len(prepared)):
        target = plan[i]
        if target[0] == "new":
            results.append(RememberResult(item=new_rows[i], created=True))
        else:
            item = new_rows[target[1]] if target[0] == "batch" else rows[target[1]]
            results.append(
                RememberResult(
                    item=item, created=False, deduplicated_into=item.pk, overlap=target[2]
                )
            )
    return results


def knowledge_remember_many(
    *, workspace: Workspace, actor: Actor, items: list[dict[str, Any]]
) -> list[RememberResult]:
    """Store a batch: all items or none (see the module docstring).

    Errors name the item: ``items[3].content``. A later item in the batch can
    deduplicate into an earlier one, as if they were stored in order.
    """
    if len(items) > settings.CAIRN_REMEMBER_BATCH_MAX:
        raise bad_request("items", f"at most {settings.CAIRN_REMEMBER_BATCH_MAX} items per batch")
    prepared: list[Prepared] = []
    for index, spec in enumerate(items):
        try:
            prepared.append(knowledge_prepare(actor=actor, **spec))
        except ApplicationError as exc:
            raise prefix_fields(exc, f"items[{index}]") from None
    if not prepared:
        return []
    embed_missing(prepared)
    sequential = (
        any(
            (p.category == Category.ERROR and p.operation_key) or p.embedding is None
            for p in prepared
        )
        or len({p.embedding_model for p in prepared}) > 1
    )
    with transaction.atomic():
        if sequential:
            return [knowledge_store(workspace, p, actor) for p in prepared]
        return _store_many(workspace, prepared, actor)
