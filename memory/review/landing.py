"""Where a person lands after logging in: somewhere with something to review."""

from __future__ import annotations

from memory.models import Knowledge, Lesson, Membership, Outcome, SkillDelta, Workspace
from memory.review.selectors import review_item_open_count
from memory.skills.selectors import delta_queue_counts


def workspace_is_empty(*, workspace: Workspace) -> bool:
    """Nothing learned or reported yet: no knowledge, deltas, lessons or outcomes."""
    return not any(
        model.objects.filter(workspace=workspace).exists()
        for model in (Knowledge, SkillDelta, Lesson, Outcome)
    )


def workspace_to_review(*, workspace: Workspace) -> int:
    """What waits for a person: deltas in the three queues and open contradictions."""
    return sum(delta_queue_counts(workspace=workspace).values()) + review_item_open_count(
        workspace=workspace
    )


def workspace_landing(*, user) -> Workspace | None:
    """The workspace to open after login (None: the person belongs to none).

    1. The default is the first membership by workspace name, as before.
    2. When the default is empty (a fresh install's "default" next to the demo),
       the person lands on the non-empty workspace with the most to review; ties go
       to the demo, then by name. With nothing anywhere, the default stays.
    """
    workspaces = [
        m.workspace
        for m in Membership.objects.select_related("workspace")
        .filter(user=user)
        .order_by("workspace__name")
    ]
    if not workspaces:
        return None
    default = workspaces[0]
    if len(workspaces) == 1 or not workspace_is_empty(workspace=default):
        return default
    candidates = [w for w in workspaces[1:] if not workspace_is_empty(workspace=w)]
    if not candidates:
        return default
    # max() keeps the first of equals, and candidates are in name order.
    return max(candidates, key=lambda w: (workspace_to_review(workspace=w), w.is_demo))
