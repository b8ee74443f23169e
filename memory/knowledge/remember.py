"""Remembering: one new item, or the near-duplicate it repeats merged (SPEC section 3,
principles 1 and 8).

Writers to one dedup scope are serialised by an advisory lock (``scope_digest``), so two
identical writes cannot both insert; a merge keeps every source and widens sensitivity
only. ``memory.knowledge.batch`` stores many items with the same pieces.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction

from memory.core.actors import Actor
from memory.core.provenance import QUOTED_KEY
from memory.knowledge.dedup import content_words, find_duplicate, normalised_words
from memory.knowledge.quoted import quoted_source
from memory.knowledge.validation import Prepared, embed_missing, knowledge_prepare
from memory.models import Category, Knowledge, Workspace


def scope_digest(workspace: Workspace, prepared: Prepared) -> int:
    """The advisory lock key of an item's dedup scope."""
    key = f"knowledge:{workspace.pk}:{prepared.category}:{prepared.context}:{prepared.entity}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


def _scope_lock(workspace: Workspace, prepared: Prepared) -> None:
    """Serialise writers to one dedup scope, so two identical writes cannot both insert."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [scope_digest(workspace, prepared)])


# --------------------------------------------------------------------------- remember


def merged_metadata(current: dict, prepared: Prepared) -> dict:
    """The stored item's metadata after a restatement merged into it.

    Its own keys keep their values; keys only the newcomer has are added; the
    newcomer's metadata, source and observed_at are appended to ``merged`` (the
    newest CAIRN_DEDUP_SOURCES_MAX, within the metadata size cap), so a merge never
    overwrites where an item came from. ``dedup_count`` counts every merge.
    """
    out = {**prepared.metadata, **current}
    out.pop("merged", None)
    source = {"source": prepared.source, "metadata": prepared.metadata}
    if prepared.observed_at is not None:
        source["observed_at"] = prepared.observed_at.isoformat()
    merged = [*(current.get("merged") or []), source][-settings.CAIRN_DEDUP_SOURCES_MAX :]
    out["dedup_count"] = int(current.get("dedup_count", 0)) + 1
    while merged:
        out["merged"] = merged
        if len(json.dumps(out, ensure_ascii=False).encode()) <= settings.CAIRN_METADATA_MAX_BYTES:
            break
        merged = merged[1:]
    else:
        out.pop("merged", None)
    return out


@dataclass(frozen=True)
class RememberResult:
    item: Knowledge
    created: bool
    deduplicated_into: int | None = None
    overlap: float | None = None


# Lists naming where an item came from: a duplicate keeps both sides' (erasure by
# session must still find an item two consolidated sessions wrote).
_PROVENANCE_LISTS = ("sessions", "turn_ids")


def _provenance_union(old: dict, new: dict) -> dict:
    merged = {}
    for key in _PROVENANCE_LISTS:
        if isinstance(old.get(key), list) and isinstance(new.get(key), list):
            merged[key] = list(dict.fromkeys([*old[key], *new[key]]))
    return merged


#: The fields a merge may change (bulk updates write exactly these).
MERGE_FIELDS = (
    "content",
    "embedding",
    "embedding_model",
    "domain",
    "sensitive",
    "metadata",
    "due_at",
    "reminded_at",
    "updated_at",
)


def merge_into(item: Knowledge, prepared: Prepared) -> None:
    """Fold a restatement into ``item`` in memory (the caller saves ``MERGE_FIELDS``).

    Nothing is lost: the fuller wording stays (the newer one when it says at least
    as much), the row keeps its confidence and history, every source is kept in
    metadata["merged"], and sensitivity only ever widens.
    """
    if content_words(prepared.words) >= content_words(normalised_words(item.content)):
        item.content = prepared.content
        item.embedding = prepared.embedding
        item.embedding_model = prepared.embedding_model
    item.domain = item.domain or prepared.domain
    item.sensitive = item.sensitive or prepared.sensitive
    item.metadata = {
        **merged_metadata(item.metadata, prepared),
        **_provenance_union(item.metadata, prepared.metadata),
    }
    if prepared.due_at is not None and prepared.due_at != item.due_at:
        item.due_at = prepared.due_at
        item.reminded_at = None


def new_item(
    workspace: Workspace, prepared: Prepared, actor: Actor, *, quoted: str | None = None
) -> Knowledge:
    """An unsaved row for a new item. An agent's (or harness's) text that repeats a
    stored turn is marked quoted (``memory.knowledge.quoted``; a batch passes what it
    found for all its items in one read as ``quoted``); a person's never is."""
    metadata = prepared.metadata
    if quoted is None and not actor.is_person and QUOTED_KEY not in metadata:
        quoted = quoted_source(workspace=workspace, content=prepared.content)
    if quoted and not actor.is_person:
        metadata = {**metadata, QUOTED_KEY: quoted}
    return Knowledge(
        workspace=workspace,
        agent=actor.agent,
        channel=actor.channel,
        content=prepared.content,
        category=prepared.category,
        domain=prepared.domain,
        entity=prepared.entity,
        context=prepared.context,
        sensitive=prepared.sensitive,
        source=prepared.source,
        confidence=prepared.confidence,
        metadata=metadata,
        due_at=prepared.due_at,
        operation_key=prepared.operation_key,
        pinned=prepared.pinned,
        sealed=prepared.sealed,
        embedding=prepared.embedding,
        embedding_model=prepared.embedding_model,
        **({"observed_at": prepared.observed_at} if prepared.observed_at else {}),
    )


def knowledge_store(workspace: Workspace, prepared: Prepared, actor: Actor) -> RememberResult:
    _scope_lock(workspace, prepared)
    duplicate = find_duplicate(workspace, prepared, actor)
    if duplicate is not None:
        item, overlap = duplicate
        merge_into(item, prepared)
        item.save(update_fields=list(MERGE_FIELDS))
        return RememberResult(item=item, created=False, deduplicated_into=item.pk, overlap=overlap)
    item = new_item(workspace, prepared, actor)
    item.save()
    return RememberResult(item=item, created=True)


def knowledge_remember(
    *,
    workspace: Workspace,
    actor: Actor,
    content: str,
    category: str = Category.FACT,
    domain: str = "",
    entity: str = "",
    context: str = "global",
    sensitive: bool = False,
    source: str | None = None,
    confidence: float | None = None,
    metadata: dict | None = None,
    due_at: datetime | None = None,
    operation_key: str = "",
    pinned: bool = False,
    sealed: bool = False,
    embedding: list[float] | None = None,
    embedding_model: str = "",
    observed_at: datetime | None = None,
) -> RememberResult:
    """Store one item, or update the near-duplicate it repeats.

    1. Validate (``knowledge_prepare``): 400 / 403 / 422 naming the field; nothing written.
    2. Embed the content before responding (or use the client's validated vector).
    3. In one transaction, under a per-scope advisory lock: find a duplicate through
       the indexes; update it (``deduplicated_into``) or insert a new row.
    """
    prepared = knowledge_prepare(
        actor=actor,
        content=content,
        category=category,
        domain=domain,
        entity=entity,
        context=context,
        sensitive=sensitive,
        source=source,
        confidence=confidence,
        metadata=metadata,
        due_at=due_at,
        operation_key=operation_key,
        pinned=pinned,
        sealed=sealed,
        embedding=embedding,
        embedding_model=embedding_model,
        observed_at=observed_at,
    )
    embed_missing([prepared])
    with transaction.atomic():
        return knowledge_store(workspace, prepared, actor)
