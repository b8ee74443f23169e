"""Hybrid search over conversation turns: the machinery of knowledge recall
(memory/knowledge/recall.py) over ``memory_conversationturn``.

One SQL statement (after the ``set_config`` calls that scope the HNSW search
parameters to the transaction):

1. ``vec``: the nearest turns by cosine distance to the query, walked on the HNSW
   index (iterative scans, so filters do not starve it), with the exact fallback
   when the walk comes back short. Turns below ``CAIRN_TURN_VECTOR_MIN_SIMILARITY``
   are not candidates: a search must not answer "lunch at noon" for "postgres".
2. ``txt``: turns matching any of the query's lexemes (GIN index, at most
   ``CAIRN_RECALL_TEXT_MATCH_CAP``), scored by BM25 (``CAIRN_TURN_TEXT_SCORING``):
   each query lexeme's idf comes from a capped count of the scope's turns holding
   it (one GIN lookup per lexeme), its term frequency from the tsvector's positions,
   the document length from the tsvector's size, normalised by the matches'
   average. ``ts_rank_cd`` is the alternative (it has no idf, so a speaker's name
   found in every turn counts as much as a rare word).
3. Fusion (``CAIRN_TURN_FUSION``), weighted 0.4/0.6 by default. ``score`` (the
   default): every candidate of either list gets both of its scores, its cosine
   similarity scaled from ``CAIRN_TURN_VECTOR_MIN_SIMILARITY`` (unrelated) to the
   best candidate's (1.0), and its BM25 over the best match's. ``minmax``, the
   earlier default: each list's scores scaled over its own candidates, a turn
   missing from a list scoring 0 there, so the ranking depended on how many
   candidates were taken (LoCoMo turn@5 0.743 with 50, 0.756 with 400; ``score``
   gives 0.754 with 50). ``rrf``: weighted reciprocal rank like knowledge recall
   (``relevance`` is 1.0 for rank 1 in both lists).
4. Lifts on the fused relevance: ``CAIRN_TURN_TIME_BOOST`` for turns said within
   a period the query names (memory/knowledge/time_words.py),
   ``CAIRN_TURN_ENTITY_BOOST`` × the share of the query's names and numbers the
   turn holds, ``CAIRN_TURN_REPLY_CREDIT`` (the turn after a text match gets a
   share of its BM25) and, off by default, ``CAIRN_TURN_SESSION_BOOST``.
5. Conversation shape (memory/knowledge/answer_kind.py): a turn that asks keeps
   ``1 - CAIRN_TURN_QUESTION_PENALTY`` of its relevance and passes
   ``CAIRN_TURN_QUESTION_CREDIT`` of it to the next turn (its answer); the turn
   before each candidate gets ``CAIRN_TURN_BEFORE_CREDIT`` of it (what a reply
   answers); a turn that holds the kind of answer asked for (a time for "when …",
   a number for "how many …") gets ``CAIRN_TURN_ANSWER_BOOST``.

Then, in Python on the few rows returned: the optional reranker
(memory/knowledge/rerank.py), neighbours, and session grouping.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.contrib.postgres.search import SearchHeadline, SearchQuery
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from memory.core.embedders import EmbeddingError
from memory.core.embeddings import get_embedder
from memory.knowledge.answer_kind import TRAILING_ASIDE_SQL, answer_pattern
from memory.knowledge.bm25 import bm25_params
from memory.knowledge.rerank import rerank_scores
from memory.knowledge.selectors import SNIPPET_OPTIONS, Page, any_word_query, page_size
from memory.knowledge.time_words import TimeWindow, query_time_window
from memory.knowledge.turn_sql import (
    NEGATED,
    query_entities,
    session_coverage_sql,
    split_query,
    turn_filters_sql,
    turn_search_sql,
)
from memory.knowledge.vector_search import (
    nearest_rows_params,
    plan_for_these_values,
    set_vector_search,
    vector_literal,
)
from memory.models import ConversationTurn, Workspace

logger = logging.getLogger(__name__)

NEIGHBOURS_MAX = 3
CANDIDATES_MAX = 1000


@dataclass
class TurnHit:
    id: int
    session_id: str
    role: str
    turn_index: int
    context: str
    created_at: datetime
    content: str
    vector_rank: int | None
    text_rank: int | None
    relevance: float
    reranked: bool = False
    # Its place in the ranking on the relevance scale: the relevance, or after the
    # reranker the i-th best relevance of the reranked head (recall_sources merges by it).
    score: float = 0.0
    snippet: str = ""
    neighbours: list[ConversationTurn] = field(default_factory=list)


@dataclass
class TurnSearchResult:
    hits: list[TurnHit]
    count: int
    window: TimeWindow | None = None  # the period the query names, read at ``as_of``


@dataclass
class SessionHit:
    session_id: str
    score: float
    hits: list[TurnHit]
    matches: int


def turn_search(
    *,
    workspace: Workspace,
    query: str,
    query_embedding: list[float] | None,
    top_k: int,
    session_id: str | None = None,
    context: str | None = None,
    context_or_global: bool = False,
    role: str | None = None,
    time_from: datetime | None = None,
    time_to: datetime | None = None,
    rerank: bool = True,
    as_of: datetime | None = None,
    **tuning,
) -> TurnSearchResult:
    """The best ``top_k`` turns for ``query``, fused (see the module docstring).

    ``tuning`` overrides settings for benchmarks: vector_weight, text_weight,
    scoring, fusion, min_similarity, candidates.
    """
    words, excluded = split_query(query)
    w_vec = tuning.get("vector_weight", settings.CAIRN_TURN_VECTOR_WEIGHT)
    w_text = tuning.get("text_weight", settings.CAIRN_TURN_TEXT_WEIGHT)
    scoring = tuning.get("scoring", settings.CAIRN_TURN_TEXT_SCORING)
    fusion = tuning.get("fusion", settings.CAIRN_TURN_FUSION)
    rerank_url = settings.CAIRN_RERANK_URL if rerank else ""
    fetch = max(top_k, settings.CAIRN_RERANK_CANDIDATES) if rerank_url else top_k
    # One ranking whatever the page size (issue 54): each list holds the same number of
    # candidates for every top_k, so a page of 5 is the first five of a page of 200.
    # (It grew with top_k before: who was a candidate, and so who got a question's
    # credit, depended on the page size; 61 of 233 LoCoMo questions changed their top 5.)
    depth = int(tuning.get("candidates") or settings.CAIRN_TURN_CANDIDATE_MIN)
    fetch = min(fetch, 2 * CANDIDATES_MAX)
    where, params = turn_filters_sql(
        workspace_id=workspace.pk,
        session_id=session_id,
        context=context,
        context_or_global=context_or_global,
        role=role,
        time_from=time_from,
        time_to=time_to,
        excluded=excluded,
    )
    use_vector = w_vec > 0 and query_embedding is not None
    use_text = w_text > 0 and bool(words.strip())
    window = query_time_window(query, now=as_of or timezone.now())
    if not (use_vector or use_text):
        return TurnSearchResult(hits=[], count=0, window=window)
    reply_credit = float(tuning.get("reply_credit", settings.CAIRN_TURN_REPLY_CREDIT))
    time_boost = float(tuning.get("time_boost", settings.CAIRN_TURN_TIME_BOOST))
    entity_boost = float(tuning.get("entity_boost", settings.CAIRN_TURN_ENTITY_BOOST))
    entities = query_entities(words) if entity_boost > 0 else []
    answer_boost = float(tuning.get("answer_boost", settings.CAIRN_TURN_ANSWER_BOOST))
    answer_re = answer_pattern(query) if answer_boost > 0 else None
    sql = turn_search_sql(
        where=where,
        use_vector=use_vector,
        use_text=use_text,
        scoring=scoring,
        fusion=fusion,
        reply_credit=reply_credit > 0,
        time_window=window if time_boost > 0 else None,
        entities=bool(entities),
        answer=bool(answer_re),
    )
    rrf_k = int(settings.CAIRN_RECALL_RRF_K)
    params.update(
        {
            "qvec": vector_literal(query_embedding) if use_vector else None,
            "emodel": get_embedder().model_id if use_vector else "",
            "text": words,
            **nearest_rows_params(),
            "w_vec": float(w_vec) if use_vector else 0.0,
            "w_text": float(w_text) if use_text else 0.0,
            "rrf_k": rrf_k,
            "rrf_norm": (rrf_k + 1)
            / ((w_vec if use_vector else 0.0) + (w_text if use_text else 0.0)),
            **bm25_params(scope_cap=100_000, df_cap=settings.CAIRN_TURN_BM25_DF_CAP),
            "reply_credit": reply_credit,
            "time_boost": time_boost,
            "entity_boost": entity_boost,
            "entities": entities,
            "entity_n": max(len(entities), 1),
            "answer_boost": answer_boost,
            "answer_re": answer_re,
            "aside": TRAILING_ASIDE_SQL,
            "question_penalty": float(
                tuning.get("question_penalty", settings.CAIRN_TURN_QUESTION_PENALTY)
            ),
            "before_credit": float(tuning.get("before_credit", settings.CAIRN_TURN_BEFORE_CREDIT)),
            "question_credit": float(
                tuning.get("question_credit", settings.CAIRN_TURN_QUESTION_CREDIT)
            ),
            "tw_start": window.start if window else None,
            "tw_end": window.end if window else None,
            "session_boost": float(tuning.get("session_boost", settings.CAIRN_TURN_SESSION_BOOST)),
            "min_sim": float(
                tuning.get("min_similarity", settings.CAIRN_TURN_VECTOR_MIN_SIMILARITY)
            ),
        }
    )

    def ranked(n: int, limit: int) -> tuple[list[TurnHit], int, bool]:
        """The best ``limit`` turns from lists of ``n`` candidates, the count, and
        whether a list was cut at ``n`` (a deeper search could find more)."""
        with transaction.atomic(), connection.cursor() as cursor:
            if use_vector:
                set_vector_search(cursor, ef_search=max(settings.CAIRN_RECALL_EF_SEARCH, n))
            else:
                plan_for_these_values(cursor)  # full text only (the embedder is down)
            cursor.execute(sql, {**params, "n": n, "top_k": int(limit)})
            rows = cursor.fetchall()
        found = [TurnHit(*row[:10]) for row in rows]
        cut = bool(rows) and max(int(rows[0][11]), int(rows[0][12])) >= n
        return found, (int(rows[0][10]) if rows else 0), cut

    # Off for turn lists: on LoCoMo's tuning half it cost turn@5 0.760 -> 0.640 at 0.3;
    # group=session asks for it (``_sessions_ranked``).
    diversity = float(tuning.get("diversity", 0.0))
    # The pool lies within the first tier (a list cut at ``depth`` gives at least that
    # many), so it is the same set whatever page is asked.
    pool = min(int(settings.CAIRN_TURN_DIVERSITY_POOL), depth) if diversity > 0 else 0
    hits, total, cut = ranked(depth, max(fetch, pool))
    if len(hits) < fetch and cut and depth < CANDIDATES_MAX:
        # A page reaching past what the fixed depth ranks: the turns a search
        # CANDIDATES_MAX deep adds follow, in its order (as fixed as the first).
        seen = {h.id for h in hits}
        deeper, total, _cut = ranked(CANDIDATES_MAX, fetch + len(hits))
        hits += [h for h in deeper if h.id not in seen][: fetch - len(hits)]
    for hit in hits:
        hit.score = hit.relevance
    if pool:
        hits = turns_diversified(hits, decay=diversity, pool=pool)
    hits = hits[:fetch]
    if rerank_url and len(hits) > 1:
        hits = _reranked(words or query, hits)
    return TurnSearchResult(hits=hits[:top_k], count=total, window=window)


def turns_diversified(hits: list[TurnHit], *, decay: float, pool: int) -> list[TurnHit]:
    """The first ``pool`` hits re-ordered so that one session cannot fill the list:
    greedily, the hit with the best relevance × (1 - ``decay``)^(hits of its session
    already placed) goes next, and that product is its ``score``. The hits past the
    pool follow, their scores capped by the last one placed.

    A question that needs several sessions ("what did Jon and Gina both lose?") finds
    its best matches in the one that says most about it; the next places go to other
    sessions that match. The pool is a fixed prefix of one ranking, so the order is
    the same whatever page is asked.
    """
    head, rest = hits[:pool], hits[pool:]
    keep = 1.0 - decay
    placed: dict[str, int] = {}
    out: list[TurnHit] = []
    left = list(range(len(head)))
    while left:
        best = max(
            left,
            key=lambda i: (head[i].relevance * keep ** placed.get(head[i].session_id, 0), -i),
        )
        hit = head[best]
        hit.score = hit.relevance * keep ** placed.get(hit.session_id, 0)
        placed[hit.session_id] = placed.get(hit.session_id, 0) + 1
        out.append(hit)
        left.remove(best)
    floor = out[-1].score if out else 0.0
    for hit in rest:
        hit.score = min(hit.relevance, floor)
    return out + rest


def _reranked(query: str, hits: list[TurnHit]) -> list[TurnHit]:
    """The first CAIRN_RERANK_CANDIDATES hits in the reranker's order, then the rest."""
    head, tail = hits[: settings.CAIRN_RERANK_CANDIDATES], hits[settings.CAIRN_RERANK_CANDIDATES :]
    scores = rerank_scores(query, [h.content for h in head])
    if scores is None:
        return hits  # the reranker failed: the fused order stands
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    # The head is the same whatever page was asked (a prefix of one ranking), so these
    # scores are too.
    scale = sorted((h.relevance for h in head), reverse=True)
    out = []
    for i, score in zip(order, scale, strict=True):
        head[i].reranked = True
        head[i].score = score
        out.append(head[i])
    return out + tail


def turns_attach_neighbours(*, workspace: Workspace, hits: list[TurnHit], neighbours: int) -> None:
    """Give each hit the ``neighbours`` turns before and after it in its session (one query)."""
    if neighbours <= 0 or not hits:
        return
    q = Q()
    for hit in hits:
        q |= Q(
            session_id=hit.session_id,
            turn_index__gte=hit.turn_index - neighbours,
            turn_index__lte=hit.turn_index + neighbours,
        )
    rows = list(
        ConversationTurn.objects.filter(q, workspace=workspace)
        .defer("search_vector", "embedding")
        .order_by("session_id", "turn_index", "id")
    )
    for hit in hits:
        hit.neighbours = [
            r
            for r in rows
            if r.session_id == hit.session_id
            and r.pk != hit.id
            and abs(r.turn_index - hit.turn_index) <= neighbours
        ]


#: With ``CAIRN_TURN_SESSION_TEMPERATURE`` 0, a session scores its best turn plus
#: this share of its second best (the rule before the soft maximum).
SESSION_SECOND_WEIGHT = 0.3


def session_score(relevances: list[float]) -> float:
    """A session's score from its turns' relevances: a soft maximum, T·ln Σ exp(r/T).

    Led by the best turn, it adds up to T·ln k for k turns as good, and little for
    weak ones: a session whose several turns answer outranks one lucky turn, while a
    tail of weak turns cannot carry a session (best + 0.3 × second counted the second
    turn however weak it was).
    """
    temperature = settings.CAIRN_TURN_SESSION_TEMPERATURE
    ranked = sorted(relevances, reverse=True)
    if temperature <= 0:
        return ranked[0] + SESSION_SECOND_WEIGHT * (ranked[1] if len(ranked) > 1 else 0.0)
    top = ranked[0]  # factored out, so exp never overflows
    return top + temperature * math.log(sum(math.exp((r - top) / temperature) for r in ranked))


def turns_group_sessions(
    hits: list[TurnHit],
    *,
    per_session: int = 3,
    coverage: dict[str, float] | None = None,
    best_turn_only: bool = False,
) -> list[SessionHit]:
    """Sessions ranked by ``session_score`` of their turns among ``hits``, plus
    ``CAIRN_TURN_SESSION_COVERAGE`` × the session's share of the query's words
    (``coverage``, from ``sessions_coverage``). ``best_turn_only``: each session
    scores its best turn's relevance alone and keeps the order of ``hits`` (the tail of
    ``conversation_search``)."""
    by_session: dict[str, list[TurnHit]] = {}
    for hit in hits:
        by_session.setdefault(hit.session_id, []).append(hit)
    coverage = coverage or {}
    weight = settings.CAIRN_TURN_SESSION_COVERAGE
    sessions = [
        SessionHit(
            session_id=session_id,
            score=max(h.relevance for h in turns)
            if best_turn_only
            else session_score([h.relevance for h in turns])
            + weight * coverage.get(session_id, 0.0),
            hits=turns[:per_session],
            matches=len(turns),
        )
        for session_id, turns in by_session.items()
    ]
    if best_turn_only:
        # In the order their best turns come (``hits`` is one ranking): a longer list of
        # hits only adds sessions after these, so every page agrees (issue 54).
        return sessions
    sessions.sort(key=lambda s: (-s.score, s.session_id))
    return sessions


def sessions_coverage(
    *, workspace: Workspace, query: str, session_ids: list[str], **scope
) -> dict[str, float]:
    """Each session's idf-weighted share of the query's words said somewhere in it, by
    any of its turns in ``scope`` (one statement, memory/knowledge/turn_sql.py).

    A session is one conversation: the turn that names the fair and the one that
    names the dance studio answer "when did Jon show his studio at a fair" together,
    where each turn alone ranks below sessions that only talk about the studio
    (LoCoMo session any@5 0.937 -> 0.945 offline, weight 0.5).
    """
    words, excluded = split_query(query)
    if not session_ids or not words.strip():
        return dict.fromkeys(session_ids, 0.0)
    where, params = turn_filters_sql(workspace_id=workspace.pk, excluded=excluded, **scope)
    params.update(
        {
            "text": words,
            "sessions": session_ids,
            **bm25_params(scope_cap=100_000, df_cap=settings.CAIRN_TURN_BM25_DF_CAP),
        }
    )
    with transaction.atomic(), connection.cursor() as cursor:
        plan_for_these_values(cursor)
        cursor.execute(session_coverage_sql(where), params)
        return dict.fromkeys(session_ids, 0.0) | dict(cursor.fetchall())


@dataclass(frozen=True)
class ConversationSearchResult:
    page: Page
    mode: str
    sessions: list[SessionHit] | None = None
    window: TimeWindow | None = None


# group=session: pages deeper than the sessions among the best CAIRN_TURN_SESSION_DEPTH
# turns take further sessions from at most this many of the best turns.
SESSION_GROUP_TURNS_MAX = 500


def _sessions_ranked(
    *, workspace: Workspace, q: str, vector, wanted: int, scope: dict, as_of: datetime | None
) -> tuple[list[SessionHit], TimeWindow | None]:
    """Sessions for ``group=session``, the same order whatever page is asked.

    The head: the sessions among the best ``CAIRN_TURN_SESSION_DEPTH`` turns, by
    ``turns_group_sessions`` (soft maximum plus coverage), always from that many
    turns: the first page of 5 and a page of 50 agree on their first five.
    When a page reaches past the head, the tail follows: further sessions among
    the best 10 × (offset + limit) turns (at most ``SESSION_GROUP_TURNS_MAX``),
    each scoring its best turn alone, an order a deeper search only extends (its
    best turn ranks below the head's best turns, so the scores still fall).
    """
    depth = settings.CAIRN_TURN_SESSION_DEPTH
    found = turn_search(
        workspace=workspace,
        query=q,
        query_embedding=vector,
        top_k=depth,
        as_of=as_of,
        diversity=settings.CAIRN_TURN_SESSION_DIVERSITY,
        **scope,
    )
    head_ids = sorted({h.session_id for h in found.hits})
    coverage = (
        sessions_coverage(workspace=workspace, query=q, session_ids=head_ids, **scope)
        if settings.CAIRN_TURN_SESSION_COVERAGE > 0
        else {}
    )
    head = turns_group_sessions(found.hits, coverage=coverage)
    deeper = min(wanted * 10, SESSION_GROUP_TURNS_MAX)
    if wanted <= len(head) or deeper <= depth or len(found.hits) < depth:
        return head, found.window
    more = turn_search(
        workspace=workspace, query=q, query_embedding=vector, top_k=deeper, as_of=as_of, **scope
    )
    known = set(head_ids)
    tail = [h for h in more.hits if h.session_id not in known]
    return head + turns_group_sessions(tail, best_turn_only=True), found.window


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
    group: str = "turn",
    neighbours: int = 0,
    as_of: datetime | None = None,
) -> ConversationSearchResult:
    """Turns (or sessions, ``group="session"``) for ``q``, best first, with snippets.

    Ranked by ``turn_search`` (vector and BM25 full text fused). ``-word``
    exclusions hold on both sides. ``mode`` is ``all`` when some turn in scope
    matches every word (``websearch_to_tsquery``), else ``any``. ``count`` is the
    number of ranked candidates: turns matching any word (at most
    CAIRN_RECALL_TEXT_MATCH_CAP) plus those found by meaning alone; with
    ``group="session"``, the number of sessions among the best turns.
    ``neighbours`` (0..3) attaches the turns just before and after each hit.
    ``as_of`` (default now) is when the question is asked: "yesterday", "10 days ago"
    are read against it into the soft window returned as ``window``.
    """
    limit = page_size(limit)
    scope = dict(
        session_id=session_id, context=context, role=role, time_from=time_from, time_to=time_to
    )
    words, _excluded = split_query(q)
    try:
        vector = get_embedder().embed_one(NEGATED.sub(" ", q).strip() or q)
    except EmbeddingError:
        logger.exception("query embedding failed; conversation search uses full text only")
        vector = None
    sessions = None
    if group == "session":
        grouped, window = _sessions_ranked(
            workspace=workspace, q=q, vector=vector, wanted=offset + limit, scope=scope, as_of=as_of
        )
        sessions = grouped[offset : offset + limit]
        items = [hit for s in sessions for hit in s.hits]
        count = len(grouped)
    else:
        found = turn_search(
            workspace=workspace,
            query=q,
            query_embedding=vector,
            top_k=offset + limit,
            as_of=as_of,
            **scope,
        )
        items = found.hits[offset : offset + limit]
        count = found.count
        window = found.window
    every = SearchQuery(q, config="english", search_type="websearch")
    base = ConversationTurn.objects.filter(workspace=workspace)
    for name, value in scope.items():
        if value is not None:
            base = base.filter(
                **{
                    {"time_from": "created_at__gte", "time_to": "created_at__lte"}.get(
                        name, name
                    ): value
                }
            )
    mode = "all" if base.filter(search_vector=every).exists() else "any"
    _attach_snippets(workspace, items, any_word_query(q) or every)
    turns_attach_neighbours(workspace=workspace, hits=items, neighbours=neighbours)
    if sessions is not None:
        page = Page(items=sessions, count=count, limit=limit, offset=offset)
    else:
        page = Page(items=items, count=max(count, offset + len(items)), limit=limit, offset=offset)
    return ConversationSearchResult(page=page, mode=mode, sessions=sessions, window=window)


def _attach_snippets(workspace: Workspace, hits: list[TurnHit], query: SearchQuery) -> None:
    if not hits:
        return
    snippets = dict(
        ConversationTurn.objects.filter(workspace=workspace, pk__in=[h.id for h in hits])
        .annotate(snippet=SearchHeadline("content", query, config="english", **SNIPPET_OPTIONS))
        .values_list("id", "snippet")
    )
    for hit in hits:
        hit.snippet = snippets.get(hit.id, "")
