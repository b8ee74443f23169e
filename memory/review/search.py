"""One search box across what a reviewer reads: lessons, knowledge, deltas and outcomes."""

from __future__ import annotations

from django.db.models import Q

from memory.knowledge.selectors import knowledge_filter
from memory.lessons.selectors import lesson_browse
from memory.models import Outcome, SkillDelta, Workspace

SEARCH_SHOWN = 10
SEARCH_MAX_CHARS = 200


def workspace_search(*, workspace: Workspace, q: str, shown: int = SEARCH_SHOWN) -> dict:
    """The first ``shown`` matches of ``q`` in each kind, newest first, and whether more exist.

    Lessons match their text or operation, knowledge its full-text index (active items,
    sensitive ones left out as in the knowledge browser), deltas their payload, rationale
    or skill name, outcomes their id, session or goal text. Each kind is one query.
    """
    q = (q or "").strip()[:SEARCH_MAX_CHARS]
    if not q:
        return {"q": "", "lessons": [], "knowledge": [], "deltas": [], "outcomes": [], "more": {}}
    found = {
        "lessons": list(lesson_browse(workspace=workspace, q=q).order_by("-id")[: shown + 1]),
        "knowledge": list(
            knowledge_filter(workspace=workspace, q=q)
            .defer("embedding")
            .order_by("-id")[: shown + 1]
        ),
        "deltas": list(
            SkillDelta.objects.filter(workspace=workspace)
            .filter(
                Q(payload__body__icontains=q)
                | Q(payload__input__icontains=q)
                | Q(payload__output__icontains=q)
                | Q(rationale__icontains=q)
                | Q(skill__name__icontains=q)
            )
            .select_related("skill", "agent")
            .defer("trigger_embedding", "payload_embedding")
            .order_by("-id")[: shown + 1]
        ),
        "outcomes": list(
            Outcome.objects.filter(workspace=workspace)
            .filter(
                Q(outcome_id__icontains=q) | Q(session_id__icontains=q) | Q(goal_text__icontains=q)
            )
            .select_related("agent")
            .defer("approach", "checks", "in_play")
            .order_by("-id")[: shown + 1]
        ),
    }
    more = {kind: len(rows) > shown for kind, rows in found.items()}
    return {"q": q, **{kind: rows[:shown] for kind, rows in found.items()}, "more": more}
