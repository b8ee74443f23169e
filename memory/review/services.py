"""The contradictions queue: pairs a job could not settle on its own (SPEC section 7).

The reconcile job (not built yet) supersedes the weaker side of a conflicting
pair by itself, except when a side is sealed or was written by a person: then it
calls ``review_item_open`` and a reviewer decides with ``review_item_resolve``.
Resolving goes through the lesson and knowledge services, so a person's "keep
A" is the same retirement (or archiving) as everywhere else, with its audit
record.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from cairn.errors import ApplicationError, NotFoundError
from memory.core.actors import Actor
from memory.core.audit import audit_record
from memory.knowledge.selectors import knowledge_lineage
from memory.knowledge.services import knowledge_forget, knowledge_update
from memory.lessons.lifecycle import lesson_edit, lesson_retire
from memory.lessons.selectors import lesson_head
from memory.models import (
    Knowledge,
    Lesson,
    ReviewItem,
    ReviewItemKind,
    ReviewItemStatus,
    ReviewResolution,
    ReviewTargetType,
    Workspace,
)

REASON_MAX_CHARS = 500
_MODELS = {ReviewTargetType.LESSON: Lesson, ReviewTargetType.KNOWLEDGE: Knowledge}


def _target_check(*, workspace: Workspace, target_type: str, target_id: int, side: str) -> None:
    model = _MODELS.get(target_type)
    if model is None:
        raise ApplicationError(
            f"{side}_type must be one of {', '.join(ReviewTargetType.values)}.",
            fields={f"{side}_type": ["unknown"]},
            status_code=400,
        )
    if not model.objects.filter(workspace=workspace, pk=target_id).exists():
        raise NotFoundError(
            f"No {target_type} {target_id} in this workspace.", fields={f"{side}_id": ["not found"]}
        )


def _open_for_pair(*, workspace, kind, a_type, a_id, b_type, b_id) -> ReviewItem | None:
    """The open item for this pair, whichever way round it was opened."""
    same = ReviewItem.objects.filter(workspace=workspace, kind=kind, status=ReviewItemStatus.OPEN)
    return (
        same.filter(a_type=a_type, a_id=a_id, b_type=b_type, b_id=b_id).first()
        or same.filter(a_type=b_type, a_id=b_id, b_type=a_type, b_id=a_id).first()
    )


def review_item_open(
    *,
    workspace: Workspace,
    a_type: str,
    a_id: int,
    b_type: str,
    b_id: int,
    reason: str,
    kind: str = ReviewItemKind.CONTRADICTION,
    actor: str = "system:reconcile",
    details: dict | None = None,
) -> tuple[ReviewItem, bool]:
    """Put a pair in front of a reviewer; returns (item, created).

    Safe to call twice, or concurrently, for the same pair (either order): while
    an item for it is open, that item is returned and nothing new is written.
    ``reason`` and ``details`` say why the job could not decide; never content.
    """
    if kind not in ReviewItemKind.values:
        raise ApplicationError(
            f"kind must be one of {', '.join(ReviewItemKind.values)}.",
            fields={"kind": ["unknown"]},
            status_code=400,
        )
    if (a_type, a_id) == (b_type, b_id):
        raise ApplicationError(
            "A contradiction needs two different items.", fields={"b_id": ["same as a_id"]}
        )
    reason = " ".join(str(reason).split())[:REASON_MAX_CHARS]
    if not reason:
        raise ApplicationError(
            "Say why the job could not settle it.", fields={"reason": ["blank"]}, status_code=400
        )
    _target_check(workspace=workspace, target_type=a_type, target_id=a_id, side="a")
    _target_check(workspace=workspace, target_type=b_type, target_id=b_id, side="b")
    pair = {"a_type": a_type, "a_id": a_id, "b_type": b_type, "b_id": b_id}
    existing = _open_for_pair(workspace=workspace, kind=kind, **pair)
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            item = ReviewItem.objects.create(
                workspace=workspace,
                kind=kind,
                reason=reason,
                details=details or {},
                opened_by=actor[:200],
                **pair,
            )
            audit_record(
                workspace=workspace,
                actor=actor,
                action="review.open",
                target_type="review_item",
                target_id=item.pk,
                reason=reason,
                details={"kind": kind, "a": f"{a_type}:{a_id}", "b": f"{b_type}:{b_id}"},
            )
    except IntegrityError:
        # A concurrent call opened it first (one open item per pair is a constraint).
        existing = _open_for_pair(workspace=workspace, kind=kind, **pair)
        if existing is None:
            raise
        return existing, False
    return item, True


def _drop(*, target_type: str, target_id: int, workspace: Workspace, actor: Actor, reason: str):
    """Take the losing side out of use through its own service, as a person's decision:
    a lesson is retired, a knowledge item archived (both kept as history). An edited
    side is dropped in its current version."""
    model = _MODELS[target_type]
    row = model.objects.filter(workspace=workspace, pk=target_id).first()
    if row is None:
        return  # gone already (erased): nothing left to drop
    if target_type == ReviewTargetType.LESSON:
        lesson_retire(lesson=lesson_head(lesson=row), actor=actor, reason=reason)
        return
    head = knowledge_lineage(item=row)[-1]
    knowledge_forget(
        workspace=workspace,
        item_id=head.pk,
        actor=actor,
        reason=reason,
    )


def _edit_into_one(*, item: ReviewItem, text: str, actor: Actor, reason: str) -> None:
    """A's current version is rewritten to ``text`` (a new version, as any person's
    edit), then B is dropped as in "keep A"."""
    workspace = item.workspace
    model = _MODELS[item.a_type]
    row = model.objects.filter(workspace=workspace, pk=item.a_id).first()
    if row is None:
        raise ApplicationError(
            "A was erased; keep B or keep both instead.", fields={"resolution": ["A is gone"]}
        )
    if item.a_type == ReviewTargetType.LESSON:
        lesson_edit(lesson=lesson_head(lesson=row), actor=actor, text=text, reason=reason)
    else:
        knowledge_update(
            workspace=workspace,
            item_id=knowledge_lineage(item=row)[-1].pk,
            actor=actor,
            changes={"content": text},
            reason=reason,
        )
    _drop(
        target_type=item.b_type,
        target_id=item.b_id,
        workspace=workspace,
        actor=actor,
        reason=reason,
    )


@transaction.atomic
def review_item_resolve(
    *, item: ReviewItem, resolution: str, actor: Actor, reason: str, text: str = ""
) -> ReviewItem:
    """A person settles an open item.

    1. Lock it; an item already resolved answers as it is (a double click is harmless).
    2. ``keep_a`` retires (or archives) B, ``keep_b`` A, through their services as a
       person's decision; ``keep_both`` changes neither; ``edit`` rewrites A into
       ``text`` (a new version) and drops B.
    3. Record the resolution on the item and in the audit log.
    """
    if resolution not in ReviewResolution.values:
        raise ApplicationError(
            "Choose keep A, keep B, keep both or edit into one.",
            fields={"resolution": ["unknown"]},
        )
    text = str(text or "").strip()
    if resolution == ReviewResolution.EDIT and not text:
        raise ApplicationError("Write the one text that replaces both.", fields={"text": ["blank"]})
    reason = " ".join(str(reason).split())[:REASON_MAX_CHARS]
    if not reason:
        raise ApplicationError(
            "Say why: the reason is kept in the audit log.", fields={"reason": ["blank"]}
        )
    item = ReviewItem.objects.select_for_update().get(pk=item.pk)
    if item.status == ReviewItemStatus.RESOLVED:
        return item
    workspace = item.workspace
    why = f"review item {item.pk}: {reason}"
    if resolution == ReviewResolution.KEEP_A:
        _drop(
            target_type=item.b_type,
            target_id=item.b_id,
            workspace=workspace,
            actor=actor,
            reason=why,
        )
    elif resolution == ReviewResolution.KEEP_B:
        _drop(
            target_type=item.a_type,
            target_id=item.a_id,
            workspace=workspace,
            actor=actor,
            reason=why,
        )
    elif resolution == ReviewResolution.EDIT:
        _edit_into_one(item=item, text=text, actor=actor, reason=why)
    item.status = ReviewItemStatus.RESOLVED
    item.resolution = resolution
    item.resolved_by = actor.label[:200]
    item.resolved_reason = reason
    item.resolved_at = timezone.now()
    item.save(
        update_fields=["status", "resolution", "resolved_by", "resolved_reason", "resolved_at"]
    )
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action="review.resolve",
        target_type="review_item",
        target_id=item.pk,
        reason=reason,
        details={"resolution": resolution},
    )
    return item
