"""Changing what the knowledge store holds (SPEC section 3, principles 4 and 9): an edit
(new words supersede the old row), archive, a person's restore and real delete.

Edits are checked like new writes (``memory.knowledge.validation``), so the API, the UI
and the jobs refuse the same things with the same errors. New items and restatements
are ``memory.knowledge.remember``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from cairn.errors import ApplicationError, NotFoundError
from memory.core.actors import Actor
from memory.core.audit import audit_record
from memory.core.embedders import EmbeddingError, validate_vector
from memory.core.embeddings import get_embedder
from memory.core.secrets import refuse_secrets
from memory.core.trust import words_change_require
from memory.core.validation import (
    bad_request,
    check_aware,
    check_metadata,
    check_text,
)
from memory.knowledge.validation import (
    DEFAULT_CONFIDENCE,
    FIELD_MAX,
    check_category,
    check_protected,
)
from memory.models import (
    CONTENT_MAX_CHARS,
    Category,
    Knowledge,
    KnowledgeStatus,
    Source,
    Workspace,
)

logger = logging.getLogger(__name__)

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
        out["category"] = check_category(out["category"], actor)
    for name in ("domain", "entity"):
        if name in out:
            out[name] = check_text(name, out[name] or "", max_chars=FIELD_MAX[name])
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
    check_protected(current, actor, "edit")
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
        check_protected(item, actor, "edit")
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
            words_change_require(actor=actor, item=item)
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
            "observed_at",
        )
    }
    fields.update(changes)
    fields["metadata"] = {**(fields.get("metadata") or {}), "supersedes": old.pk}
    if actor.is_person:
        # A person vouches for the new words: they keep what the old ones earned.
        fields["source"] = Source.USER
    else:
        # New words from a token are that token's claim: they start where a new item
        # from it starts, whatever the old words had earned or whoever wrote them (and
        # never above where contradictions had left the old words).
        fields["source"] = Source.AGENT
        fields["confidence"] = min(float(old.confidence), DEFAULT_CONFIDENCE)
        fields["pinned"] = False
    # The old row leaves the one-active-error-per-operation slot for a moment, so the
    # new version can take it; it keeps its own status once it points at the new one.
    Knowledge.objects.filter(pk=old.pk).update(status=KnowledgeStatus.ARCHIVED)
    new = Knowledge.objects.create(
        workspace=workspace,
        agent=actor.agent or old.agent,
        channel=actor.channel,
        embedding=vector,
        embedding_model=model_id if vector is not None else "",
        **fields,
    )
    Knowledge.objects.filter(pk=old.pk).update(
        superseded_by=new, status=old.status, updated_at=timezone.now()
    )
    old.refresh_from_db(from_queryset=Knowledge.objects.filter(workspace=workspace))
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


def _audit_status_change(
    *, workspace: Workspace, item: Knowledge, actor: Actor, action: str, reason: str
) -> None:
    """Audit an archive or a restore: the item's id and category, never its content."""
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action=action,
        target_type="knowledge",
        target_id=item.pk,
        reason=reason[:500],
        details={"category": item.category},
    )


def _require_person(actor: Actor, message: str) -> None:
    """403 ``permission_denied`` on ``id`` unless a person acts (restore, real delete)."""
    if not actor.is_person:
        raise ApplicationError(
            message, code="permission_denied", fields={"id": ["people only"]}, status_code=403
        )


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
    check_protected(item, actor, "forget")
    item.status = KnowledgeStatus.ARCHIVED
    item.archived_at = timezone.now()
    item.save(update_fields=["status", "archived_at", "updated_at"])
    _audit_status_change(
        workspace=workspace, item=item, actor=actor, action="knowledge.archive", reason=reason
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
    _require_person(actor, "Only a person can restore an archived item.")
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
    _audit_status_change(
        workspace=workspace, item=item, actor=actor, action="knowledge.restore", reason=reason
    )
    return item


@transaction.atomic
def knowledge_delete(*, workspace: Workspace, item_id: int, actor: Actor, reason: str = "") -> int:
    """A person's real delete: the item and the older versions it superseded.

    Returns the number of rows deleted. The audit record names ids and category,
    never content. (Whole-workspace erasure is a separate admin job.)
    """
    _require_person(actor, "Only a person can delete knowledge; an agent's DELETE archives it.")
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
