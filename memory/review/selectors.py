"""Reads for the contradictions queue."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from memory.models import (
    AuditEvent,
    ConfidenceChange,
    Knowledge,
    Lesson,
    ReviewItem,
    ReviewItemStatus,
    ReviewTargetType,
    Workspace,
)

REVIEW_ITEM_ORDER = ("-created_at", "-id")
SIDE_HISTORY_MAX = 5  # audit events and ledger rows shown per side


def review_item_list(*, workspace: Workspace, status: str = ReviewItemStatus.OPEN) -> QuerySet:
    """Newest first; ``status`` open (the queue), resolved, or '' for both."""
    items = ReviewItem.objects.filter(workspace=workspace)
    if status in ReviewItemStatus.values:
        items = items.filter(status=status)
    return items.order_by(*REVIEW_ITEM_ORDER)


def review_item_get(*, workspace: Workspace, pk: int) -> ReviewItem | None:
    return ReviewItem.objects.filter(workspace=workspace, pk=pk).first()


def review_item_open_count(*, workspace: Workspace) -> int:
    return ReviewItem.objects.filter(workspace=workspace, status=ReviewItemStatus.OPEN).count()


def review_item_targets(*, workspace: Workspace, items: list[ReviewItem]) -> None:
    """Attach ``item.a`` and ``item.b`` (the rows, or None if gone): two queries per page."""
    wanted: dict[str, set[int]] = {t: set() for t in ReviewTargetType.values}
    for item in items:
        wanted[item.a_type].add(item.a_id)
        wanted[item.b_type].add(item.b_id)
    querysets = {
        ReviewTargetType.LESSON: Lesson.objects.filter(workspace=workspace),
        ReviewTargetType.KNOWLEDGE: Knowledge.objects.filter(workspace=workspace).defer(
            "embedding", "search_vector"
        ),
    }
    found = {
        kind: querysets[kind].in_bulk(sorted(ids)) if ids else {} for kind, ids in wanted.items()
    }
    for item in items:
        for side in ("a", "b"):
            row = found[getattr(item, f"{side}_type")].get(getattr(item, f"{side}_id"))
            setattr(item, side, row)


def review_item_history(*, workspace: Workspace, items: list[ReviewItem]) -> None:
    """Attach each side's recent history (``item.a_history``: audit events, e.g. the
    reconcile decision) and evidence (``item.a_ledger``: confidence changes with their
    cause), newest first: two queries per page."""
    keys = {(getattr(i, f"{s}_type"), getattr(i, f"{s}_id")) for i in items for s in "ab"}
    if not keys:
        return
    by_type: dict[str, set[int]] = {}
    for kind, pk in keys:
        by_type.setdefault(kind, set()).add(pk)
    events: dict[tuple[str, int], list] = {key: [] for key in keys}
    ledger: dict[tuple[str, int], list] = {key: [] for key in keys}
    by_kind = Q()
    for kind, ids in by_type.items():
        by_kind |= Q(target_type=kind, target_id__in=sorted(ids))
    changes = ConfidenceChange.objects.filter(by_kind, workspace=workspace).order_by("-at", "-id")
    for row in changes[: SIDE_HISTORY_MAX * 40]:
        bucket = ledger[(row.target_type, row.target_id)]
        if len(bucket) < SIDE_HISTORY_MAX:
            bucket.append(row)
    by_kind = Q()
    for kind, ids in by_type.items():
        by_kind |= Q(target_type=kind, target_id__in=[str(pk) for pk in sorted(ids)])
    audit = AuditEvent.objects.filter(by_kind, workspace=workspace).order_by("-created_at", "-id")
    for event in audit[: SIDE_HISTORY_MAX * 40]:
        bucket = events[(event.target_type, int(event.target_id))]
        if len(bucket) < SIDE_HISTORY_MAX:
            bucket.append(event)
    for item in items:
        for side in "ab":
            key = (getattr(item, f"{side}_type"), getattr(item, f"{side}_id"))
            setattr(item, f"{side}_history", events[key])
            setattr(item, f"{side}_ledger", ledger[key])
