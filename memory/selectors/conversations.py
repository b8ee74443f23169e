"""Reading conversations and tool calls: search past turns, per-tool success rates."""

from __future__ import annotations

import re
from datetime import datetime

from django.conf import settings
from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchRank
from django.db.models import Avg, Count, F, Max, OuterRef, Q, QuerySet, Subquery

from memory.models import ConversationTurn, ToolCall, Workspace
from memory.selectors.knowledge import Page, page_size

_WORD = re.compile(r"\w+", re.UNICODE)
SNIPPET_OPTIONS = {
    "start_sel": "**",
    "stop_sel": "**",
    "max_words": 35,
    "min_words": 12,
    "max_fragments": 2,
    "fragment_delimiter": " … ",
}


def _turn_scope(
    *,
    workspace: Workspace,
    session_id: str | None,
    context: str | None,
    role: str | None,
    time_from: datetime | None,
    time_to: datetime | None,
) -> QuerySet[ConversationTurn]:
    qs = ConversationTurn.objects.filter(workspace=workspace)
    if session_id is not None:
        qs = qs.filter(session_id=session_id)
    if context is not None:
        qs = qs.filter(context=context)
    if role is not None:
        qs = qs.filter(role=role)
    if time_from is not None:
        qs = qs.filter(created_at__gte=time_from)
    if time_to is not None:
        qs = qs.filter(created_at__lte=time_to)
    return qs


def conversation_search(
    *,
    workspace: Workspace,
    q: str,
    session_id: str | None = None,
    context: str | None = None,
    role: str | None = None,
    time_from: datetime | None = None,
    time_to: datetime | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> tuple[Page, str]:
    """Turns matching ``q``, best first, with highlighted snippets.

    Every word must match (``websearch_to_tsquery``: quotes, ``or`` and ``-word``
    work as on a search engine); when nothing matches all of them, any word does.
    Returns the page and the mode used (``all`` or ``any``).
    """
    scope = _turn_scope(
        workspace=workspace,
        session_id=session_id,
        context=context,
        role=role,
        time_from=time_from,
        time_to=time_to,
    )
    limit = page_size(limit)
    mode = "all"
    query = SearchQuery(q, config="english", search_type="websearch")
    matches = scope.filter(search_vector=query)
    count = matches.count()
    if count == 0:
        words = _WORD.findall(q)
        if len(words) > 1:
            mode = "any"
            query = SearchQuery(" OR ".join(words), config="english", search_type="websearch")
            matches = scope.filter(search_vector=query)
            count = matches.count()
    rows = list(
        matches.annotate(
            rank=SearchRank(F("search_vector"), query, cover_density=True),
            snippet=SearchHeadline("content", query, config="english", **SNIPPET_OPTIONS),
        )
        .defer("content")
        .order_by("-rank", "-created_at", "-id")[offset : offset + limit]
    )
    return Page(items=rows, count=count, limit=limit, offset=offset), mode


def turns_list(
    *, workspace: Workspace, session_id: str, limit: int | None = None, offset: int = 0
) -> Page:
    """A session's turns in order."""
    qs = ConversationTurn.objects.filter(workspace=workspace, session_id=session_id)
    limit = page_size(limit)
    rows = list(qs.order_by("turn_index", "id")[offset : offset + limit])
    count = qs.count() if (rows or offset) else 0
    return Page(items=rows, count=count, limit=limit, offset=offset)


def tool_call_stats(
    *,
    workspace: Workspace,
    tool: str | None = None,
    since: datetime | None = None,
    recent_errors: int | None = None,
) -> dict:
    """Per-tool success rates and the most recent errors.

    ``{"tools": [{tool, total, ok, failed, success_rate, avg_duration_ms, last_at,
    last_error}], "recent_errors": [{tool, operation_key, error, at, session_id}]}``;
    tools sorted by name, errors newest first.
    """
    qs = ToolCall.objects.filter(workspace=workspace)
    if tool is not None:
        qs = qs.filter(tool=tool)
    if since is not None:
        qs = qs.filter(at__gte=since)
    last_error = Subquery(
        qs.filter(tool=OuterRef("tool"), ok=False).order_by("-at", "-id").values("error")[:1]
    )
    tools = []
    for row in (
        qs.values("tool")
        .annotate(
            total=Count("id"),
            ok_count=Count("id", filter=Q(ok=True)),
            avg_duration_ms=Avg("duration_ms"),
            last_at=Max("at"),
            last_error=last_error,
        )
        .order_by("tool")
    ):
        tools.append(
            {
                "tool": row["tool"],
                "total": row["total"],
                "ok": row["ok_count"],
                "failed": row["total"] - row["ok_count"],
                "success_rate": round(row["ok_count"] / row["total"], 4),
                "avg_duration_ms": (
                    None if row["avg_duration_ms"] is None else round(row["avg_duration_ms"], 1)
                ),
                "last_at": row["last_at"],
                "last_error": row["last_error"],
            }
        )
    cap = settings.CAIRN_TOOL_STATS_RECENT_ERRORS if recent_errors is None else recent_errors
    errors = list(
        qs.filter(ok=False)
        .order_by("-at", "-id")
        .values("tool", "operation_key", "error", "at", "session_id")[:cap]
    )
    return {"tools": tools, "recent_errors": errors}
