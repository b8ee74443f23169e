"""What a knowledge write must satisfy before it is stored: category and
protected fields, content checks, credential refusal, and its embedding."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.core.embedders import EmbeddingError, validate_vector
from memory.core.embeddings import get_embedder
from memory.core.provenance import APPROVED_KEY
from memory.core.secrets import refuse_secrets
from memory.core.validation import (
    bad_request,
    check_aware,
    check_metadata,
    check_text,
)
from memory.knowledge.dedup import normalised_words
from memory.knowledge.prepared import Prepared
from memory.models import (
    CONTENT_MAX_CHARS,
    PRIVILEGED_CATEGORIES,
    Category,
    Knowledge,
    Source,
)

logger = logging.getLogger(__name__)

FIELD_MAX = {"domain": 100, "entity": 200, "context": 200, "operation_key": 200}


def check_category(category: Any, actor: Actor) -> str:
    """A known category the actor may write (people only for the privileged ones)."""
    if category not in Category.values:
        raise bad_request("category", f"must be one of {', '.join(Category.values)}")
    if category in PRIVILEGED_CATEGORIES and not actor.is_person:
        raise ApplicationError(
            f"Category '{category}' is writable only by people (403): system, profile and "
            "permission items change what an agent may do, so an agent cannot write them. "
            "Use fact, preference, note, skill, error or reminder.",
            code="privileged_category",
            fields={"category": ["writable only by people"]},
            status_code=403,
        )
    return category


def check_protected(item: Knowledge, actor: Actor, verb: str) -> None:
    """Agents cannot change what a person wrote, pinned or sealed."""
    if actor.is_person or actor.kind == "system":
        return
    reason = None
    if item.category in PRIVILEGED_CATEGORIES:
        reason = f"it is a '{item.category}' item, writable only by people"
    elif item.sealed:
        reason = "it is sealed (written or approved by a person)"
    elif item.pinned:
        reason = "it is pinned by a person"
    if reason:
        raise ApplicationError(
            f"An agent cannot {verb} knowledge item {item.pk}: {reason}. Ask a person to do it "
            "in the review UI.",
            code="protected",
            fields={"id": [reason]},
            status_code=403,
        )


def knowledge_prepare(
    *,
    actor: Actor,
    content: Any,
    category: Any = Category.FACT,
    domain: Any = "",
    entity: Any = "",
    context: Any = "global",
    sensitive: bool = False,
    source: Any = None,
    confidence: float | None = None,
    metadata: Any = None,
    due_at: Any = None,
    operation_key: Any = "",
    pinned: bool = False,
    sealed: bool = False,
    embedding: Any = None,
    embedding_model: str = "",
    observed_at: Any = None,
) -> Prepared:
    """Validate one new item. Raises ApplicationError naming the field (nothing is written).

    1. Shape: content non-empty and at most 2,000 characters (400, never a silent cut);
       short fields within their column sizes; metadata a small JSON object.
    2. Category: privileged categories only from people (403).
    3. Source and confidence: agents write as ``agent``/``extract`` at the default
       confidence, and cannot pin or seal.
    4. Reminders need ``due_at``.
    5. Credentials anywhere in the text fields: 422 ``credential_refused``.
    6. A client-supplied embedding must be a valid vector of the right size.
    """
    content = check_text("content", content, max_chars=CONTENT_MAX_CHARS, allow_blank=False)
    category = check_category(category, actor)
    domain = check_text("domain", domain or "", max_chars=FIELD_MAX["domain"])
    entity = check_text("entity", entity or "", max_chars=FIELD_MAX["entity"])
    context = check_text(
        "context", context or "global", max_chars=FIELD_MAX["context"], allow_blank=False
    )
    operation_key = check_text(
        "operation_key", operation_key or "", max_chars=FIELD_MAX["operation_key"]
    )
    metadata = check_metadata(metadata)
    due_at = check_aware("due_at", due_at)
    observed_at = check_observed_at(observed_at)
    if source is None:
        source = Source.USER if actor.is_person else Source.AGENT
    if source not in Source.values:
        raise bad_request("source", f"must be one of {', '.join(Source.values)}")
    if actor.kind == "agent":
        if source not in AGENT_SOURCES:
            raise bad_request("source", "agents write as 'agent' or 'extract'")
        if confidence is not None:
            raise bad_request("confidence", "only evidence moves confidence")
        if pinned or sealed:
            raise bad_request("pinned" if pinned else "sealed", "only people pin or seal items")
    if not actor.is_person and APPROVED_KEY in metadata:
        raise bad_request("metadata", f"{APPROVED_KEY} is set by a person's answer to the gate")
    if confidence is None:
        confidence = DEFAULT_CONFIDENCE
    if not (0.0 <= float(confidence) <= 1.0):
        raise bad_request("confidence", "must be between 0 and 1")
    if category == Category.REMINDER and due_at is None:
        raise bad_request("due_at", "a reminder needs due_at (ISO 8601)")
    refuse_secrets(
        {
            "content": content,
            "domain": domain,
            "entity": entity,
            "context": context,
            "operation_key": operation_key,
            "metadata": metadata,
        }
    )
    vector = None
    if embedding is not None:
        try:
            vector = validate_vector(embedding)
        except ValueError as exc:
            raise bad_request("embedding", str(exc)) from None
        embedding_model = check_text(
            "embedding_model", embedding_model or "client", max_chars=100, allow_blank=False
        )
    return Prepared(
        content=content,
        category=category,
        domain=domain,
        entity=entity,
        context=context,
        sensitive=bool(sensitive),
        source=source,
        confidence=float(confidence),
        metadata=metadata,
        due_at=due_at,
        operation_key=operation_key,
        pinned=bool(pinned),
        sealed=bool(sealed) or (actor.is_person and category in PRIVILEGED_CATEGORIES),
        embedding=vector,
        embedding_model=embedding_model if vector is not None else "",
        words=normalised_words(content),
        observed_at=observed_at,
    )


#: Clock skew tolerated between a client and the server for ``observed_at``.
OBSERVED_AT_SKEW = timedelta(minutes=5)


def check_observed_at(value: Any) -> datetime | None:
    """An aware timestamp not in the future (a few minutes of clock skew allowed)."""
    value = check_aware("observed_at", value)
    if value is not None and value > timezone.now() + OBSERVED_AT_SKEW:
        raise bad_request("observed_at", "must not be in the future")
    return value


def embed_missing(items: list[Prepared]) -> None:
    """Embed every item that has no client vector, in one batch.

    An embedder failure does not lose the write: the item is stored without a vector
    (found by full-text recall until the embed backfill job fills it in).
    """
    todo = [p for p in items if p.embedding is None]
    if not todo:
        return
    embedder = get_embedder()
    try:
        vectors = embedder.embed([p.content for p in todo])
    except EmbeddingError:
        logger.exception("embedding failed; storing %d item(s) without vectors", len(todo))
        return
    for prepared, vector in zip(todo, vectors, strict=True):
        prepared.embedding = vector
        prepared.embedding_model = embedder.model_id


#: Sources an agent may claim for what it writes (error_auto, user, consolidation
#: and import belong to the tool-call log, people and jobs).
AGENT_SOURCES = frozenset({Source.AGENT, Source.EXTRACT})


#: Confidence of a new item unless a person or a job says otherwise. Not settable by
#: agents: only evidence moves it (SPEC principle 1).
DEFAULT_CONFIDENCE = 0.5
