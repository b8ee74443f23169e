"""Writing the knowledge store (SPEC section 3, principles 1, 4, 8, 9).

Every write path goes through ``_prepare`` (validation, privileged categories,
credential refusal) before anything touches the database, so the API, the UI
and the jobs refuse the same things with the same errors.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from cairn.errors import ApplicationError, NotFoundError
from memory.embeddings import EmbeddingError, get_embedder, validate_vector
from memory.models import (
    CONTENT_MAX_CHARS,
    PRIVILEGED_CATEGORIES,
    Agent,
    Category,
    Knowledge,
    KnowledgeStatus,
    Source,
    Workspace,
)
from memory.selectors.knowledge import (
    RecallHit,
    knowledge_search,
    recall_default_top_k,
    set_vector_search,
    vector_literal,
)
from memory.services.audit import audit_record
from memory.services.secrets_scan import refuse_secrets
from memory.services.validation import (
    bad_request,
    check_aware,
    check_metadata,
    check_text,
    prefix_fields,
)

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------- actors


@dataclass(frozen=True)
class Actor:
    """Who is writing: an agent (API token), a person (UI) or the system (a job)."""

    kind: str  # "agent" | "person" | "system"
    label: str  # for the audit log: "agent:gaia/chat", "user:alice", "system:tool-calls"
    agent: Agent | None = None
    user: Any = None

    @classmethod
    def for_agent(cls, agent: Agent) -> Actor:
        return cls(kind="agent", label=f"agent:{agent.name}", agent=agent)

    @classmethod
    def for_user(cls, user) -> Actor:
        return cls(kind="person", label=f"user:{user.get_username()}", user=user)

    @classmethod
    def system(cls, name: str) -> Actor:
        return cls(kind="system", label=f"system:{name}")

    @property
    def is_person(self) -> bool:
        return self.kind == "person"


#: Sources an agent may claim for what it writes (error_auto, user, consolidation
#: and import belong to the tool-call log, people and jobs).
AGENT_SOURCES = frozenset({Source.AGENT, Source.EXTRACT})
#: Confidence of a new item unless a person or a job says otherwise. Not settable by
#: agents: only evidence moves it (SPEC principle 1).
DEFAULT_CONFIDENCE = 0.5

# --------------------------------------------------------------------------- validation

_WORD = re.compile(r"\w+", re.UNICODE)
_FIELD_MAX = {"domain": 100, "entity": 200, "context": 200, "operation_key": 200}


def normalised_words(text: str) -> frozenset[str]:
    """The word set dedup compares: case-folded runs of letters and digits."""
    return frozenset(w.casefold() for w in _WORD.findall(text))


def overlap_coefficient(a: frozenset[str], b: frozenset[str]) -> float:
    """Szymkiewicz–Simpson: |A ∩ B| / min(|A|, |B|); 0 when either set is empty."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def _check_category(category: Any, actor: Actor) -> str:
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


def _check_protected(item: Knowledge, actor: Actor, verb: str) -> None:
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


@dataclass
class _Prepared:
    """A validated new item, ready to embed and store."""

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
    operation_key: str
    pinned: bool
    sealed: bool
    embedding: list[float] | None
    embedding_model: str
    words: frozenset[str] = field(default_factory=frozenset)


def _prepare(
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
) -> _Prepared:
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
    category = _check_category(category, actor)
    domain = check_text("domain", domain or "", max_chars=_FIELD_MAX["domain"])
    entity = check_text("entity", entity or "", max_chars=_FIELD_MAX["entity"])
    context = check_text(
        "context", context or "global", max_chars=_FIELD_MAX["context"], allow_blank=False
    )
    operation_key = check_text(
        "operation_key", operation_key or "", max_chars=_FIELD_MAX["operation_key"]
    )
    metadata = check_metadata(metadata)
    due_at = check_aware("due_at", due_at)
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
    return _Prepared(
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
    )


def _embed_missing(items: list[_Prepared]) -> None:
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


# --------------------------------------------------------------------------- dedup


def _scope_lock(workspace: Workspace, prepared: _Prepared) -> None:
    """Serialise writers to one dedup scope, so two identical writes cannot both insert."""
    key = f"knowledge:{workspace.pk}:{prepared.category}:{prepared.context}:{prepared.entity}"
    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [digest])


@dataclass(frozen=True)
class _Candidate:
    pk: int
    content: str
    category: str
    sealed: bool
    pinned: bool


_DEDUP_SQL = """
    SELECT k.id, k.content, k.category, k.sealed, k.pinned FROM memory_knowledge k
    WHERE k.id IN (
        (SELECT t.id FROM memory_knowledge t
         WHERE {scope_t} AND t.search_vector @@ websearch_to_tsquery('english', %(terms)s)
         ORDER BY ts_rank_cd(t.search_vector, websearch_to_tsquery('english', %(terms)s)) DESC,
                  t.id
         LIMIT %(cap)s)
        UNION
        (SELECT v.id FROM memory_knowledge v
         WHERE {scope_v} AND %(qvec)s::vector IS NOT NULL AND v.embedding IS NOT NULL
         ORDER BY v.embedding <=> %(qvec)s::vector
         LIMIT %(cap)s)
    )
    ORDER BY k.id
"""


def _dedup_candidates(workspace: Workspace, prepared: _Prepared) -> list[_Candidate]:
    """A bounded candidate list from the indexes (never a scan of the scope in Python).

    One statement: rows sharing any of the new item's words, best ``ts_rank_cd`` first
    (GIN), united with the nearest rows by cosine distance (HNSW, iterative scan so the
    scope filter cannot starve it); each side capped at CAIRN_DEDUP_CANDIDATES.
    """
    cap = settings.CAIRN_DEDUP_CANDIDATES
    scope = (
        "{a}.workspace_id = %(workspace_id)s AND {a}.category = %(category)s "
        "AND {a}.context = %(context)s AND {a}.entity = %(entity)s "
        "AND {a}.status = 'active' AND {a}.superseded_by_id IS NULL"
    )
    sql = _DEDUP_SQL.format(scope_t=scope.format(a="t"), scope_v=scope.format(a="v"))
    params = {
        "workspace_id": workspace.pk,
        "category": prepared.category,
        "context": prepared.context,
        "entity": prepared.entity,
        # Words joined by "or": a row sharing any one of them is a candidate.
        "terms": " or ".join(sorted(prepared.words)[:200]),
        "qvec": None if prepared.embedding is None else vector_literal(prepared.embedding),
        "cap": cap,
    }
    with connection.cursor() as cursor:
        if prepared.embedding is not None:
            set_vector_search(cursor, ef_search=max(settings.CAIRN_RECALL_EF_SEARCH, cap))
        cursor.execute(sql, params)
        return [_Candidate(*row) for row in cursor.fetchall()]


def _find_duplicate(
    workspace: Workspace, prepared: _Prepared, actor: Actor
) -> tuple[Knowledge, float] | None:
    """The active item this new one should update instead of adding, and the overlap.

    An error item with an ``operation_key`` has exactly one active row per operation;
    otherwise the best word overlap above CAIRN_DEDUP_OVERLAP in the same
    category + context + entity wins. Agents never overwrite what a person protected
    (privileged, sealed, pinned): their item is stored beside it instead.
    """
    if prepared.category == Category.ERROR and prepared.operation_key:
        row = (
            Knowledge.objects.select_for_update()
            .filter(
                workspace=workspace,
                category=Category.ERROR,
                operation_key=prepared.operation_key,
                status=KnowledgeStatus.ACTIVE,
                superseded_by__isnull=True,
            )
            .first()
        )
        if row is not None:
            return row, overlap_coefficient(prepared.words, normalised_words(row.content))
    best: tuple[_Candidate, float] | None = None
    for row in _dedup_candidates(workspace, prepared):
        if not actor.is_person and (
            row.sealed or row.pinned or row.category in PRIVILEGED_CATEGORIES
        ):
            continue
        score = overlap_coefficient(prepared.words, normalised_words(row.content))
        if score > settings.CAIRN_DEDUP_OVERLAP and (
            best is None or (score, -row.pk) > (best[1], -best[0].pk)
        ):
            best = (row, score)
    if best is None:
        return None
    locked = Knowledge.objects.select_for_update().get(pk=best[0].pk)
    return locked, best[1]


# --------------------------------------------------------------------------- remember


@dataclass(frozen=True)
class RememberResult:
    item: Knowledge
    created: bool
    deduplicated_into: int | None = None
    overlap: float | None = None


def _store(workspace: Workspace, prepared: _Prepared, actor: Actor) -> RememberResult:
    _scope_lock(workspace, prepared)
    duplicate = _find_duplicate(workspace, prepared, actor)
    if duplicate is not None:
        item, overlap = duplicate
        # The newer wording is assumed to be more current; the row, its confidence and
        # its history stay. Sensitivity only ever widens.
        item.content = prepared.content
        item.embedding = prepared.embedding
        item.embedding_model = prepared.embedding_model
        item.domain = prepared.domain or item.domain
        item.sensitive = item.sensitive or prepared.sensitive
        item.metadata = {
            **item.metadata,
            **prepared.metadata,
            "dedup_count": int(item.metadata.get("dedup_count", 0)) + 1,
        }
        if prepared.due_at is not None and prepared.due_at != item.due_at:
            item.due_at = prepared.due_at
            item.reminded_at = None
        item.save(
            update_fields=[
                "content",
                "embedding",
                "embedding_model",
                "domain",
                "sensitive",
                "metadata",
                "due_at",
                "reminded_at",
                "updated_at",
            ]
        )
        return RememberResult(item=item, created=False, deduplicated_into=item.pk, overlap=overlap)
    item = Knowledge.objects.create(
        workspace=workspace,
        agent=actor.agent,
        content=prepared.content,
        category=prepared.category,
        domain=prepared.domain,
        entity=prepared.entity,
        context=prepared.context,
        sensitive=prepared.sensitive,
        source=prepared.source,
        confidence=prepared.confidence,
        metadata=prepared.metadata,
        due_at=prepared.due_at,
        operation_key=prepared.operation_key,
        pinned=prepared.pinned,
        sealed=prepared.sealed,
        embedding=prepared.embedding,
        embedding_model=prepared.embedding_model,
    )
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
) -> RememberResult:
    """Store one item, or update the near-duplicate it repeats.

    1. Validate (``_prepare``): 400 / 403 / 422 naming the field; nothing written.
    2. Embed the content before responding (or use the client's validated vector).
    3. In one transaction, under a per-scope advisory lock: find a duplicate through
       the indexes; update it (``deduplicated_into``) or insert a new row.
    """
    prepared = _prepare(
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
    )
    _embed_missing([prepared])
    with transaction.atomic():
        return _store(workspace, prepared, actor)


def knowledge_remember_many(
    *, workspace: Workspace, actor: Actor, items: list[dict[str, Any]]
) -> list[RememberResult]:
    """Store a batch: all items or none. One embedding call for the whole batch.

    Errors name the item: ``items[3].content``. Items are stored in order, so a
    later item in the batch can deduplicate into an earlier one.
    """
    if len(items) > settings.CAIRN_REMEMBER_BATCH_MAX:
        raise bad_request("items", f"at most {settings.CAIRN_REMEMBER_BATCH_MAX} items per batch")
    prepared: list[_Prepared] = []
    for index, spec in enumerate(items):
        try:
            prepared.append(_prepare(actor=actor, **spec))
        except ApplicationError as exc:
            raise prefix_fields(exc, f"items[{index}]") from None
    _embed_missing(prepared)
    with transaction.atomic():
        return [_store(workspace, p, actor) for p in prepared]


# --------------------------------------------------------------------------- update

UPDATABLE_FIELDS = frozenset(
    {
        "content",
        "category",
        "domain",
        "entity",
        "context",
        "sensitive",
        "metadata",
        "due_at",
        "reminded_at",
        "embedding",
        "embedding_model",
        # people only:
        "pinned",
        "sealed",
        "confidence",
    }
)
PERSON_ONLY_FIELDS = frozenset({"pinned", "sealed", "confidence"})


@dataclass(frozen=True)
class UpdateResult:
    item: Knowledge
    supersedes: int | None = None  # the old id, when the edit inserted a new version


def _validate_changes(item: Knowledge, changes: dict[str, Any], actor: Actor) -> dict[str, Any]:
    unknown = set(changes) - UPDATABLE_FIELDS
    if unknown:
        raise bad_request(sorted(unknown)[0], "cannot be changed here")
    if not actor.is_person:
        for name in PERSON_ONLY_FIELDS & set(changes):
            raise bad_request(name, "only people change this (evidence moves confidence)")
    out = dict(changes)
    if "content" in out:
        out["content"] = check_text(
            "content", out["content"], max_chars=CONTENT_MAX_CHARS, allow_blank=False
        )
    if "category" in out:
        out["category"] = _check_category(out["category"], actor)
    for name in ("domain", "entity"):
        if name in out:
            out[name] = check_text(name, out[name] or "", max_chars=_FIELD_MAX[name])
    if "context" in out:
        out["context"] = check_text(
            "context", out["context"] or "global", max_chars=200, allow_blank=False
        )
    if "metadata" in out:
        out["metadata"] = check_metadata(out["metadata"])
    for name in ("due_at", "reminded_at"):
        if name in out:
            out[name] = check_aware(name, out[name])
    if "confidence" in out and not (0.0 <= float(out["confidence"]) <= 1.0):
        raise bad_request("confidence", "must be between 0 and 1")
    category = out.get("category", item.category)
    due_at = out.get("due_at", item.due_at)
    if category == Category.REMINDER and due_at is None:
        raise bad_request("due_at", "a reminder needs due_at (ISO 8601)")
    if "embedding" in out and out["embedding"] is not None:
        if "content" not in out:
            raise bad_request("embedding", "send embedding together with the new content")
        try:
            out["embedding"] = validate_vector(out["embedding"])
        except ValueError as exc:
            raise bad_request("embedding", str(exc)) from None
    refuse_secrets(
        {
            name: out[name]
            for name in ("content", "domain", "entity", "context", "metadata")
            if name in out
        }
    )
    return out


def knowledge_update(
    *,
    workspace: Workspace,
    item_id: int,
    actor: Actor,
    changes: dict[str, Any],
    reason: str = "",
) -> UpdateResult:
    """Change an item (PATCH semantics: only the given fields).

    1. Validate like a new write (400 / 403 / 422; nothing written on refusal).
       Agents cannot touch privileged, sealed or pinned items (403).
    2. A new content **supersedes**: a new row with the new content and a fresh
       embedding, the old row pointing at it (SPEC principle 4). The answer names
       the new id and the id it supersedes. Editing a superseded version is a 409.
    3. Any other change is made in place; moving ``due_at`` re-arms the reminder.
    """
    current = Knowledge.objects.filter(workspace=workspace, pk=item_id).first()
    if current is None:
        raise NotFoundError(f"No knowledge item {item_id}.", fields={"id": ["not found"]})
    _check_protected(current, actor, "edit")
    changes = _validate_changes(current, changes, actor)
    new_content = changes.get("content")
    content_changes = new_content is not None and new_content != current.content
    vector, model_id = changes.get("embedding"), changes.get("embedding_model") or "client"
    if content_changes and vector is None:
        embedder = get_embedder()
        try:
            vector, model_id = embedder.embed_one(new_content), embedder.model_id
        except EmbeddingError:
            logger.exception("embedding failed; the new version is stored without a vector")
            vector, model_id = None, ""
    with transaction.atomic():
        item = Knowledge.objects.select_for_update().filter(workspace=workspace, pk=item_id).first()
        if item is None:
            raise NotFoundError(f"No knowledge item {item_id}.", fields={"id": ["not found"]})
        if item.superseded_by_id is not None:
            raise ApplicationError(
                f"Knowledge item {item.pk} was superseded by {item.superseded_by_id}; "
                "edit the current version.",
                code="superseded",
                fields={"id": [f"superseded by {item.superseded_by_id}"]},
                status_code=409,
            )
        _check_protected(item, actor, "edit")
        if item.status == KnowledgeStatus.ARCHIVED:
            raise ApplicationError(
                f"Knowledge item {item.pk} is archived; a person can restore it before it is "
                "edited.",
                code="archived",
                fields={"id": ["archived"]},
                status_code=409,
            )
        if item.content != current.content:
            content_changes = new_content is not None and new_content != item.content
        changes.pop("embedding", None)
        changes.pop("embedding_model", None)
        if "due_at" in changes and changes["due_at"] != item.due_at:
            changes.setdefault("reminded_at", None)
        if content_changes:
            return _supersede(workspace, item, changes, actor, vector, model_id, reason)
        changes.pop("content", None)
        changed = sorted(name for name, value in changes.items() if getattr(item, name) != value)
        for name, value in changes.items():
            setattr(item, name, value)
        if changes:
            item.save(update_fields=[*changes, "updated_at"])
        if changed and actor.is_person:
            # A person's change in place is a review decision: keep who, why and which
            # fields (never the values, which may be content).
            audit_record(
                workspace=workspace,
                actor=actor.label,
                action="knowledge.update",
                target_type="knowledge",
                target_id=item.pk,
                reason=reason[:500],
                details={"fields": changed},
            )
        return UpdateResult(item=item)


def _supersede(
    workspace: Workspace,
    old: Knowledge,
    changes: dict[str, Any],
    actor: Actor,
    vector: list[float] | None,
    model_id: str,
    reason: str = "",
) -> UpdateResult:
    fields = {
        name: getattr(old, name)
        for name in (
            "category",
            "domain",
            "entity",
            "context",
            "sensitive",
            "source",
            "confidence",
            "metadata",
            "due_at",
            "reminded_at",
            "operation_key",
            "pinned",
            "sealed",
        )
    }
    fields.update(changes)
    fields["metadata"] = {**(fields.get("metadata") or {}), "supersedes": old.pk}
    if actor.is_person:
        fields["source"] = Source.USER
    # The old row leaves the one-active-error-per-operation slot for a moment, so the
    # new version can take it; it keeps its own status once it points at the new one.
    Knowledge.objects.filter(pk=old.pk).update(status=KnowledgeStatus.ARCHIVED)
    new = Knowledge.objects.create(
        workspace=workspace,
        agent=actor.agent or old.agent,
        embedding=vector,
        embedding_model=model_id if vector is not None else "",
        **fields,
    )
    Knowledge.objects.filter(pk=old.pk).update(
        superseded_by=new, status=old.status, updated_at=timezone.now()
    )
    old.refresh_from_db()
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action="knowledge.supersede",
        target_type="knowledge",
        target_id=old.pk,
        reason=reason[:500],
        details={"superseded_by": new.pk, "category": new.category},
    )
    return UpdateResult(item=new, supersedes=old.pk)


# --------------------------------------------------------------------------- forget / restore / delete


def _locked(workspace: Workspace, item_id: int) -> Knowledge:
    item = Knowledge.objects.select_for_update().filter(workspace=workspace, pk=item_id).first()
    if item is None:
        raise NotFoundError(f"No knowledge item {item_id}.", fields={"id": ["not found"]})
    return item


@transaction.atomic
def knowledge_forget(
    *, workspace: Workspace, item_id: int, actor: Actor, reason: str = ""
) -> Knowledge:
    """Archive an item: out of recall and the memory block, row kept, restorable by a
    person. Forgetting an archived item changes nothing. Agents cannot archive what a
    person protected (403)."""
    item = _locked(workspace, item_id)
    if item.status == KnowledgeStatus.ARCHIVED:
        return item
    _check_protected(item, actor, "forget")
    item.status = KnowledgeStatus.ARCHIVED
    item.archived_at = timezone.now()
    item.save(update_fields=["status", "archived_at", "updated_at"])
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action="knowledge.archive",
        target_type="knowledge",
        target_id=item.pk,
        reason=reason[:500],
        details={"category": item.category},
    )
    return item


@transaction.atomic
def knowledge_restore(
    *,
    workspace: Workspace,
    item_id: int,
    actor: Actor,
    reason: str = "",
    now: datetime | None = None,
) -> Knowledge:
    """Bring an archived item back (people only; one action, SPEC section 7).

    Its idle clock restarts (``last_used_at``): otherwise an item archived for being
    idle 90 days would be archived again by the next decay run.
    """
    if not actor.is_person:
        raise ApplicationError(
            "Only a person can restore an archived item.",
            code="permission_denied",
            fields={"id": ["people only"]},
            status_code=403,
        )
    item = _locked(workspace, item_id)
    if item.status == KnowledgeStatus.ACTIVE:
        return item
    item.status = KnowledgeStatus.ACTIVE
    item.archived_at = None
    item.last_used_at = now or timezone.now()
    try:
        with transaction.atomic():
            item.save(update_fields=["status", "archived_at", "last_used_at", "updated_at"])
    except IntegrityError:
        raise ApplicationError(
            f"Another active error item already tracks operation '{item.operation_key}'; "
            "archive that one first.",
            code="conflict",
            fields={"id": ["an active error item for this operation exists"]},
            status_code=409,
        ) from None
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action="knowledge.restore",
        target_type="knowledge",
        target_id=item.pk,
        reason=reason[:500],
        details={"category": item.category},
    )
    return item


@transaction.atomic
def knowledge_delete(*, workspace: Workspace, item_id: int, actor: Actor, reason: str = "") -> int:
    """A person's real delete: the item and the older versions it superseded.

    Returns the number of rows deleted. The audit record names ids and category,
    never content. (Whole-workspace erasure is a separate admin job.)
    """
    if not actor.is_person:
        raise ApplicationError(
            "Only a person can delete knowledge; an agent's DELETE archives it.",
            code="permission_denied",
            fields={"id": ["people only"]},
            status_code=403,
        )
    item = _locked(workspace, item_id)
    lineage = [item.pk]
    frontier = [item.pk]
    while frontier:
        frontier = list(
            Knowledge.objects.filter(workspace=workspace, superseded_by__in=frontier).values_list(
                "pk", flat=True
            )
        )
        lineage.extend(frontier)
    category = item.category
    deleted, _ = Knowledge.objects.filter(workspace=workspace, pk__in=lineage).delete()
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action="knowledge.delete",
        target_type="knowledge",
        target_id=item_id,
        reason=reason[:500],
        details={"category": category, "deleted_ids": sorted(lineage)},
    )
    return deleted


# --------------------------------------------------------------------------- recall


@dataclass(frozen=True)
class RecallResult:
    top_k: int
    hits: list[RecallHit]


def knowledge_recall(
    *,
    workspace: Workspace,
    query: str,
    top_k: int | None = None,
    context: str | None = None,
    category: str | None = None,
    entity: str | None = None,
    time_from: datetime | None = None,
    time_to: datetime | None = None,
    include_sensitive: bool = False,
    embedding: list[float] | None = None,
    now: datetime | None = None,
) -> RecallResult:
    """Hybrid recall, then mark the results used.

    Retrieval is not evidence (SPEC principle 1): this refreshes ``last_used_at``
    and ``use_count`` of what it returns and never changes ``confidence``.
    """
    query = check_text("query", query, max_chars=CONTENT_MAX_CHARS, allow_blank=False)
    if top_k is None:
        top_k = recall_default_top_k(query)
    top_k = max(1, min(int(top_k), settings.CAIRN_RECALL_TOP_K_MAX))
    if embedding is not None:
        try:
            vector = validate_vector(embedding)
        except ValueError as exc:
            raise bad_request("embedding", str(exc)) from None
    else:
        try:
            vector = get_embedder().embed_one(query)
        except EmbeddingError:
            logger.exception("query embedding failed; recall falls back to full text only")
            vector = None
    hits = knowledge_search(
        workspace=workspace,
        query=query,
        query_embedding=vector,
        top_k=top_k,
        context=context,
        category=category,
        entity=entity,
        time_from=time_from,
        time_to=time_to,
        include_sensitive=include_sensitive,
    )
    knowledge_mark_used(workspace=workspace, item_ids=[h.id for h in hits], now=now)
    return RecallResult(top_k=top_k, hits=hits)


def knowledge_mark_used(
    *, workspace: Workspace, item_ids: list[int], now: datetime | None = None
) -> int:
    """Refresh recency and the use count. Confidence and updated_at stay as they are."""
    if not item_ids:
        return 0
    return Knowledge.objects.filter(workspace=workspace, pk__in=item_ids).update(
        use_count=F("use_count") + 1, last_used_at=now or timezone.now()
    )


# --------------------------------------------------------------------------- error items


ERROR_ITEM_ACTOR = Actor.system("tool-calls")


def _iso(moment: datetime) -> str:
    """A sortable UTC timestamp for metadata (string order = time order)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def error_item_content(*, tool: str, operation_key: str, error: str) -> str:
    """What an automatic error item says; cut to the content cap with a visible mark."""
    text = f"{tool} failed on {operation_key}"
    if error.strip():
        text += ": " + " ".join(error.split())
    if len(text) > CONTENT_MAX_CHARS:
        text = text[: CONTENT_MAX_CHARS - 1] + "…"
    return text


@dataclass(frozen=True)
class FailureRecord:
    workspace: Workspace
    agent: Agent | None
    tool: str
    operation_key: str
    error: str
    at: datetime
    session_id: str = ""


@transaction.atomic
def knowledge_record_failures(
    *, failures: list[FailureRecord], embeddings: dict[str, list[float]] | None = None
) -> list[Knowledge]:
    """Store or refresh the one active ``error`` item per failing operation.

    Runs in the caller's transaction when there is one (the tool-call batch). Each
    failure:
    1. If a success on the same operation was logged after it, nothing (it is fixed).
    2. The active error item for the operation (unique per workspace) gets the latest
       message, a failure count and the time; else the newest item archived by a
       success comes back; else a new item (source error_auto) is inserted.
    """
    from memory.models import ToolCall

    embeddings = embeddings or {}
    touched: dict[int, Knowledge] = {}
    for failure in failures:
        later_success = ToolCall.objects.filter(
            workspace=failure.workspace,
            operation_key=failure.operation_key,
            ok=True,
            at__gt=failure.at,
        ).exists()
        if later_success:
            continue
        content = error_item_content(
            tool=failure.tool, operation_key=failure.operation_key, error=failure.error
        )
        vector = embeddings.get(content)
        base = Knowledge.objects.select_for_update().filter(
            workspace=failure.workspace,
            category=Category.ERROR,
            operation_key=failure.operation_key,
            superseded_by__isnull=True,
        )
        item = base.filter(status=KnowledgeStatus.ACTIVE).first()
        if item is None:
            item = (
                base.filter(status=KnowledgeStatus.ARCHIVED, metadata__archived_by="success")
                .order_by("-archived_at", "-id")
                .first()
            )
        stamp = _iso(failure.at)
        if item is None:
            item = Knowledge.objects.create(
                workspace=failure.workspace,
                agent=failure.agent,
                content=content,
                category=Category.ERROR,
                domain=failure.tool[:100],
                context="global",
                source=Source.ERROR_AUTO,
                confidence=DEFAULT_CONFIDENCE,
                operation_key=failure.operation_key,
                metadata={
                    "tool": failure.tool,
                    "failures": 1,
                    "first_failed_at": stamp,
                    "last_failed_at": stamp,
                    "session_id": failure.session_id,
                },
                embedding=vector,
                embedding_model=get_embedder().model_id if vector is not None else "",
            )
        else:
            was_archived = item.status == KnowledgeStatus.ARCHIVED
            metadata = dict(item.metadata)
            last = metadata.get("last_failed_at") or ""
            metadata["failures"] = int(metadata.get("failures", 0)) + 1
            metadata["tool"] = failure.tool
            metadata.pop("archived_by", None)
            if stamp >= last:
                metadata["last_failed_at"] = stamp
                metadata["session_id"] = failure.session_id
                # A person's wording (pinned or sealed) stays; the count still moves.
                if content != item.content and not (item.pinned or item.sealed):
                    item.content = content
                    item.embedding = vector
                    item.embedding_model = get_embedder().model_id if vector is not None else ""
            item.metadata = metadata
            item.status = KnowledgeStatus.ACTIVE
            item.archived_at = None
            item.save()
            if was_archived:
                audit_record(
                    workspace=failure.workspace,
                    actor=ERROR_ITEM_ACTOR.label,
                    action="knowledge.error_reopened",
                    target_type="knowledge",
                    target_id=item.pk,
                    details={"operation_key": failure.operation_key},
                )
        touched[item.pk] = item
    return list(touched.values())


@transaction.atomic
def knowledge_resolve_failure(
    *, workspace: Workspace, operation_key: str, at: datetime
) -> Knowledge | None:
    """A success on an operation archives its active error item, if the failure it
    records is not newer than the success. Returns the archived item."""
    item = (
        Knowledge.objects.select_for_update()
        .filter(
            workspace=workspace,
            category=Category.ERROR,
            operation_key=operation_key,
            status=KnowledgeStatus.ACTIVE,
            superseded_by__isnull=True,
        )
        .first()
    )
    if item is None:
        return None
    last_failed = item.metadata.get("last_failed_at")
    if last_failed and last_failed > _iso(at):
        return None
    if item.pinned or item.sealed:
        return None
    item.status = KnowledgeStatus.ARCHIVED
    item.archived_at = timezone.now()
    item.metadata = {**item.metadata, "archived_by": "success", "resolved_at": _iso(at)}
    item.save(update_fields=["status", "archived_at", "metadata", "updated_at"])
    audit_record(
        workspace=workspace,
        actor=ERROR_ITEM_ACTOR.label,
        action="knowledge.error_resolved",
        target_type="knowledge",
        target_id=item.pk,
        details={"operation_key": operation_key},
    )
    return item
