"""Reading the knowledge store: get, list and hybrid recall (SPEC section 3).

Recall is one SQL statement (after two ``set_config`` calls that scope the HNSW
search parameters to the transaction):

1. ``vec``: the nearest rows by cosine distance, ``ORDER BY embedding <=> q LIMIT n``,
   answered by the HNSW index. pgvector 0.8 iterative scans
   (``hnsw.iterative_scan = relaxed_order``) keep scanning the graph until ``n``
   rows pass the filters, so a tight filter does not starve the list; the CTE
   re-sorts by exact distance because relaxed order may be slightly out of order.
2. ``txt``: full-text matches ``search_vector @@ tsquery`` ranked by ``ts_rank_cd``,
   answered by the GIN index.
3. Reciprocal-rank fusion ``w_vec/(K+rank_vec) + w_text/(K+rank_text)`` over the
   union. ``relevance`` is that sum scaled by ``(K+1)/(w_vec+w_text)``, so rank 1 in
   both lists is 1.0 (a constant factor: the order by relevance is the spec's).
   ``score = relevance + 0.05 × confidence``. Unscaled, RRF sums never exceed
   1/61 ≈ 0.016 and 0.05 × confidence would outweigh relevance; scaled, strength
   can only reorder items whose relevance is within 0.05 of each other, which is
   what "strength is a tiebreaker only" asks for.

Both lists see the same filters: workspace, active and not superseded, context
(plus ``global``), category, entity, created_at range, sensitive only on request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.postgres.search import SearchQuery
from django.db.models import Avg, Count, Max, OuterRef, Q, QuerySet, Subquery
from pgvector.django import CosineDistance

from cairn.errors import NotFoundError
from memory.core.text import WORD
from memory.models import (
    ConfidenceChange,
    ConversationTurn,
    Knowledge,
    KnowledgeStatus,
    TargetType,
    ToolCall,
    Workspace,
)

# --------------------------------------------------------------------------- get / list


def knowledge_get(*, workspace: Workspace, item_id: int) -> Knowledge:
    """One item of this workspace, whatever its status; 404 for other workspaces' ids."""
    item = Knowledge.objects.filter(workspace=workspace, pk=item_id).first()
    if item is None:
        raise NotFoundError(f"No knowledge item {item_id}.", fields={"id": ["not found"]})
    return item


@dataclass(frozen=True)
class Page:
    items: list
    count: int
    limit: int
    offset: int

    @property
    def next_offset(self) -> int | None:
        following = self.offset + len(self.items)
        return following if following < self.count else None


def knowledge_list(
    *,
    workspace: Workspace,
    limit: int | None = None,
    offset: int = 0,
    **filters: Any,
) -> Page:
    """A page of items, newest first. ``filters`` are those of ``knowledge_filter``
    (``status`` is ``active``, ``archived`` or ``all``)."""
    qs = knowledge_filter(workspace=workspace, **filters)
    limit = page_size(limit)
    items = list(qs.order_by("-created_at", "-id").defer("embedding")[offset : offset + limit])
    count = qs.count() if (items or offset) else 0
    return Page(items=items, count=count, limit=limit, offset=offset)


def knowledge_filter(
    *,
    workspace: Workspace,
    category: str | None = None,
    context: str | None = None,
    entity: str | None = None,
    domain: str | None = None,
    status: str = KnowledgeStatus.ACTIVE,
    q: str | None = None,
    include_sensitive: bool = False,
    include_superseded: bool = False,
    due_before: datetime | None = None,
    due_after: datetime | None = None,
    created_from: datetime | None = None,
    created_to: datetime | None = None,
) -> QuerySet[Knowledge]:
    qs = Knowledge.objects.filter(workspace=workspace)
    if status != "all":
        qs = qs.filter(status=status)
    if not include_superseded:
        qs = qs.filter(superseded_by__isnull=True)
    if not include_sensitive:
        qs = qs.filter(sensitive=False)
    for field, value in (
        ("category", category),
        ("context", context),
        ("entity", entity),
        ("domain", domain),
    ):
        if value is not None:
            qs = qs.filter(**{field: value})
    if q:
        qs = qs.filter(search_vector=SearchQuery(q, config="english", search_type="websearch"))
    if due_before is not None:
        qs = qs.filter(due_at__lte=due_before)
    if due_after is not None:
        qs = qs.filter(due_at__gte=due_after)
    if created_from is not None:
        qs = qs.filter(created_at__gte=created_from)
    if created_to is not None:
        qs = qs.filter(created_at__lte=created_to)
    return qs


def page_size(limit: int | None) -> int:
    if limit is None:
        return settings.CAIRN_LIST_PAGE_SIZE
    return max(1, min(int(limit), settings.CAIRN_LIST_PAGE_SIZE_MAX))


# --------------------------------------------------------------------------- recall


def json_value(value):
    """A JSON column read by raw SQL (text) or by the ORM (a dict or None) as a dict."""
    import json

    return json.loads(value) if isinstance(value, str) else (value or {})


# --------------------------------------------------------------------------- the review UI

KNOWLEDGE_ORDER = ("-created_at", "-id")


def knowledge_browse(
    *,
    workspace: Workspace,
    category: str | None = None,
    context: str | None = None,
    entity: str | None = None,
    status: str = KnowledgeStatus.ACTIVE,
    q: str | None = None,
    include_sensitive: bool = False,
) -> QuerySet[Knowledge]:
    """The browser's list: current versions, filtered like ``knowledge_list``, without the
    vectors. The caller pages it (keyset, ``KNOWLEDGE_ORDER``); nothing here marks use."""
    return knowledge_filter(
        workspace=workspace,
        category=category,
        context=context,
        entity=entity,
        status=status,
        q=q,
        include_sensitive=include_sensitive,
    ).defer("embedding", "search_vector")


# The review UI's search lists what is relevant, not every active item. Recall's
# relevance is a fused *rank* (RRF): with few items every row is "rank n" of the vector
# list, however unrelated, and the fused score cannot tell. So the cut-off uses what
# does: a hit stays above it when it matched the query's words (full text) or its
# embedding is close in absolute terms, cosine similarity >= SEARCH_SIMILARITY_FLOOR and
# >= SEARCH_SIMILARITY_RATIO x the best hit's (MiniLM puts unrelated sentences near
# 0.0-0.2 and paraphrases above 0.5). Everything else is "below the cut-off", one
# click away.
SEARCH_SIMILARITY_FLOOR = 0.3
SEARCH_SIMILARITY_RATIO = 0.75


def knowledge_similarities(
    *, workspace: Workspace, ids: list[int], vector: list[float] | None
) -> dict[int, float]:
    """``{id: cosine similarity to vector}`` for items with an embedding (one query)."""
    if not ids or vector is None:
        return {}
    rows = (
        Knowledge.objects.filter(workspace=workspace, pk__in=ids, embedding__isnull=False)
        .annotate(distance=CosineDistance("embedding", vector))
        .values_list("pk", "distance")
    )
    return {pk: 1.0 - float(distance) for pk, distance in rows}


def search_cutoff(hits: list, similarities: dict[int, float]) -> tuple[list, list]:
    """(hits above the cut-off, hits below it), each in recall order (see above)."""
    best = max(similarities.values(), default=0.0)
    needed = max(SEARCH_SIMILARITY_FLOOR, SEARCH_SIMILARITY_RATIO * best)
    above, below = [], []
    for hit in hits:
        close = similarities.get(hit.id, 0.0) >= needed
        (above if hit.text_rank is not None or close else below).append(hit)
    return above, below


def word_lexemes(words: list[str], *, query: str) -> tuple[dict[str, set[str]], set[str]]:
    """The full-text lexemes of each word and of ``query`` (PostgreSQL's english stemmer,
    the one search uses), so a page can mark the words that matched: one query."""
    from django.db import connection

    distinct = sorted({w.casefold() for w in words})[:5000]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT w, tsvector_to_array(to_tsvector('english', w)) FROM unnest(%s::text[]) AS w",
            [[*distinct, query]],
        )
        found = {w: set(lexemes or []) for w, lexemes in cursor.fetchall()}
    return {w: found.get(w, set()) for w in distinct}, found.get(query, set())


def knowledge_lineage(*, item: Knowledge) -> list[Knowledge]:
    """The item's versions, oldest first: every row superseded into its current version,
    and that current version (a few queries per generation; lineages are short)."""
    head, seen = item, {item.pk}
    while head.superseded_by_id is not None and head.superseded_by_id not in seen:
        seen.add(head.superseded_by_id)
        head = Knowledge.objects.defer("embedding", "search_vector").get(pk=head.superseded_by_id)
    rows, frontier = {head.pk: head}, [head.pk]
    while frontier:
        found = list(
            Knowledge.objects.filter(superseded_by_id__in=frontier)
            .exclude(pk__in=rows)
            .defer("embedding", "search_vector")
        )
        rows.update((row.pk, row) for row in found)
        frontier = [row.pk for row in found]
    return sorted(rows.values(), key=lambda row: (row.created_at, row.pk))


def knowledge_ledger(*, item_ids: list[int]) -> dict[int, list[ConfidenceChange]]:
    """Each item's confidence changes ("strength"), oldest first."""
    changes: dict[int, list[ConfidenceChange]] = {pk: [] for pk in item_ids}
    for change in ConfidenceChange.objects.filter(
        target_type=TargetType.KNOWLEDGE, target_id__in=item_ids
    ).order_by("at", "id"):
        changes[change.target_id].append(change)
    return changes


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


_NEGATED = re.compile(r"(?:^|\s)-(\w+)")


def any_word_query(q: str) -> SearchQuery | None:
    """Any of the query's words, minus its ``-word`` exclusions (None for one word)."""
    excluded = {w.casefold() for w in _NEGATED.findall(q)}
    words = [w for w in WORD.findall(q) if w.casefold() not in excluded]
    if len(words) < 2:
        return None
    expr = "(" + " | ".join(words) + ")"
    if excluded:
        expr += "".join(f" & !{w}" for w in sorted(excluded) if WORD.fullmatch(w))
    return SearchQuery(expr, config="english", search_type="raw")


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


SESSION_VIEW_MAX = 500


def conversation_session_get(*, workspace: Workspace, session_id: str) -> dict:
    """One session as a reviewer reads it: turns in order, tool calls inline by time.

    ``{"entries": [{"kind": "turn"|"tool_call", "at", "item"}], "turns": n,
    "truncated": bool}``, at most ``SESSION_VIEW_MAX`` of each.
    """
    turns = list(
        ConversationTurn.objects.filter(workspace=workspace, session_id=session_id)
        .select_related("agent")
        .defer("search_vector")
        .order_by("turn_index", "id")[: SESSION_VIEW_MAX + 1]
    )
    calls = list(
        ToolCall.objects.filter(workspace=workspace, session_id=session_id).order_by("at", "id")[
            : SESSION_VIEW_MAX + 1
        ]
    )
    truncated = len(turns) > SESSION_VIEW_MAX or len(calls) > SESSION_VIEW_MAX
    turns, calls = turns[:SESSION_VIEW_MAX], calls[:SESSION_VIEW_MAX]
    entries = []
    pending = iter(calls)
    call = next(pending, None)
    for turn in turns:
        # A tool call goes before the first turn recorded after it.
        while call is not None and call.at < turn.created_at:
            entries.append({"kind": "tool_call", "at": call.at, "item": call})
            call = next(pending, None)
        entries.append({"kind": "turn", "at": turn.created_at, "item": turn})
    while call is not None:
        entries.append({"kind": "tool_call", "at": call.at, "item": call})
        call = next(pending, None)
    return {"entries": entries, "turns": len(turns), "truncated": truncated}
