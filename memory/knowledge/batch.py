"""Remembering a batch at the speed of the embedder (``POST /knowledge/batch/``).

One model call embeds the batch; the dedup scopes are locked in one statement (in
key order, so two batches cannot deadlock); one statement reads every item's dedup
candidates (batch_sql.py: a small scope read exactly for the whole batch, a large
one walked through the HNSW index per item, with the distance cut-off that the
dedup rules imply); Python applies the dedup rules (dedup.py) against those rows
and the batch's own earlier items (one matrix product finds the close pairs); the
merge targets are locked in id order; then one INSERT adds the new rows and one
UPDATE writes the merged ones. The vectors travel in binary.

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
from memory.core.trust import knowledge_earned_ids, words_may_change
from memory.core.validation import bad_request, prefix_fields
from memory.knowledge.batch_sql import batch_candidates, insert_new
from memory.knowledge.dedup import (
    content_words,
    is_restatement,
    is_turn,
    normalised_words,
    overlap_coefficient,
)
from memory.knowledge.prepared import Prepared
from memory.knowledge.quoted import quoted_sources
from memory.knowledge.remember import (
    MERGE_FIELDS,
    RememberResult,
    knowledge_store,
    merge_into,
    new_item,
    scope_digest,
)
from memory.knowledge.validation import embed_missing, knowledge_prepare
from memory.models import PRIVILEGED_CATEGORIES, Category, Knowledge, Workspace


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
    candidates = batch_candidates(workspace, prepared)
    min_sim = settings.CAIRN_DEDUP_MIN_SIMILARITY
    # Which earlier items of the batch each one is close enough to (one matrix product).
    units = np.stack([_unit(p.embedding) for p in prepared])
    close = (units @ units.T) >= min_sim
    # Per item: ("db", pk, overlap) | ("batch", j, overlap) | ("new",)
    plan: list[tuple] = []
    texts: dict[tuple[str, Any], tuple[str, frozenset[str]]] = {}  # current wording
    earned = (
        knowledge_earned_ids(
            (row.pk for rows in candidates.values() for row in rows), workspace_id=workspace.pk
        )
        if not actor.weighs
        else set()
    )
    for i, p in enumerate(prepared):
        best: tuple[float, int, tuple] | None = None
        if not is_turn(p.metadata):
            for row in candidates.get(i, []):
                if not words_may_change(actor=actor, earned=row.pk in earned):
                    continue
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
            for j in np.flatnonzero(close[i, :i]).tolist():
                q = prepared[j]
                if plan[j][0] != "new" or is_turn(q.metadata):
                    continue
                if (q.category, q.context, q.entity) != (p.category, p.context, p.entity):
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
    fresh = [i for i, target in enumerate(plan) if target[0] == "new"]
    quotes = dict.fromkeys(fresh, "")  # "": looked for, none (a person's: never looked)
    if fresh and not actor.is_person:
        found = quoted_sources(workspace=workspace, contents=[prepared[i].content for i in fresh])
        quotes.update({i: hit or "" for i, hit in zip(fresh, found, strict=True)})
    for i, p in enumerate(prepared):
        target = plan[i]
        if target[0] == "new":
            new_rows[i] = new_item(workspace, p, actor, quoted=quotes[i])
        elif target[0] == "batch":
            merge_into(new_rows[target[1]], p)
        else:
            merge_into(rows[target[1]], p)
    insert_new(list(new_rows.values()), [prepared[i].observed_at for i in new_rows])
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
