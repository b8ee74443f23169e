"""Reads for the contradictions queue."""

from __future__ import annotations

from django.db.models import QuerySet

from memory.models import (
    Knowledge,
    Lesson,
    ReviewItem,
    ReviewItemStatus,
    ReviewTargetType,
    Workspace,
)

REVIEW_ITEM_ORDER = ("-created_at", "-id")


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
