"""Hybrid search over conversation turns: the machinery of knowledge recall
(memory/knowledge/recall.py) over ``memory_conversationturn``.

One SQL statement (after the ``set_config`` calls that scope the HNSW search
parameters to the transaction):

1. ``vec``: the nearest turns by cosine distance to the query, walked on the HNSW
   index (iterative scans, so filters do not starve it), with the exact fallback
   when the walk comes back empty. Turns below ``CAIRN_TURN_VECTOR_MIN_SIMILARITY``
   are not candidates: a search must not answer "lunch at noon" for "postgres".
2. ``txt``: turns matching any of the query's lexemes (GIN index, at most
   ``CAIRN_RECALL_TEXT_MATCH_CAP``), scored by BM25 (``CAIRN_TURN_TEXT_SCORING``):
   each query lexeme's idf comes from a capped count of the scope's turns holding
   it (one GIN lookup per lexeme), its term frequency from the tsvector's positions,
   the document length from the tsvector's size, normalised by the matches'
   average. ``ts_rank_cd`` is the alternative (it has no idf, so a speaker's name
   found in every turn counts as much as a rare word).
3. Fusion (``CAIRN_TURN_FUSION``): weighted reciprocal rank like knowledge recall
   (``relevance`` is 1.0 for rank 1 in both lists), or ``score``: each list's
   scores scaled to 0..1 over its candidates and weighted (the default, 0.4/0.6).
4. Lifts on the fused relevance: ``CAIRN_TURN_TIME_BOOST`` for turns said within
   a period the query names (memory/knowledge/time_words.py),
   ``CAIRN_TURN_ENTITY_BOOST`` × the share of the query's names and numbers the
   turn holds, and (off by default) ``CAIRN_TURN_REPLY_CREDIT`` (the turn after a
   text match gets a share of its BM25) and ``CAIRN_TURN_SESSION_BOOST``.

Then, in Python on the few rows returned: the optional reranker
(memory/knowledge/rerank.py), neighbours, and session grouping.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.contrib.postgres.search import SearchHeadline, SearchQuery
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from memory.core.embedders import EmbeddingError
from memory.core.embeddings import get_embedder
from memory.core.text import WORD
from memory.knowledge.recall import set_vector_search, vector_literal
from memory.knowledge.rerank import rerank_scores
from memory.knowledge.selectors import SNIPPET_OPTIONS, Page, any_word_query, page_size
from memory.knowledge.time_words import TimeWindow, query_time_window
from memory.models import ConversationTurn, Workspace

logger = logging.getLogger(__name__)

NEIGHBOURS_MAX = 3
CANDIDATES_MAX = 1000
_NEGATED = re.compile(r"(?:^|\s)-(\w+)")


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
    snippet: str = ""
    neighbours: list[ConversationTurn] = field(default_factory=list)


@dataclass
class TurnSearchResult:
    hits: list[TurnHit]
    count: int


@dataclass
class SessionHit:
    session_id: str
    score: float
    hits: list[TurnHit]
    matches: int


def turn_filters_sql(
    *,
    workspace_id: int,
    session_id: str | None = None,
    context: str | None = None,
    context_or_global: bool = False,
    role: str | None = None,
    time_from: datetime | None = None,
    time_to: datetime | None = None,
    excluded: list[str] | None = None,
) -> tuple[str, dict]:
    """The WHERE clause both candidate lists share, and its parameters."""
    clauses = ["t.workspace_id = %(workspace_id)s"]
    params: dict = {"workspace_id": workspace_id}
    if session_id is not None:
        clauses.append("t.session_id = %(session_id)s")
        params["session_id"] = session_id
    if context is not None:
        clauses.append(
            "t.context IN (%(context)s, 'global')"
            if context_or_global
            else "t.context = %(context)s"
        )
        params["context"] = context
    if role is not None:
        clauses.append("t.role = %(role)s")
        params["role"] = role
    if time_from is not None:
        clauses.append("t.created_at >= %(time_from)s")
        params["time_from"] = time_from
    if time_to is not None:
        clauses.append("t.created_at <= %(time_to)s")
        params["time_to"] = time_to
    if excluded:
        # A ``-word`` of the query: turns holding it are no candidates on either side.
        clauses.append("NOT t.search_vector @@ to_tsquery('english', %(excluded)s)")
        params["excluded"] = " | ".join(excluded)
    return " AND ".join(clauses), params


def split_query(q: str) -> tuple[str, list[str]]:
    """The words to look for and the ``-word`` exclusions of a query."""
    excluded = sorted({w.casefold() for w in _NEGATED.findall(q)})
    words = [w for w in WORD.findall(_NEGATED.sub(" ", q))]
    return " ".join(words), [w for w in excluded if WORD.fullmatch(w)]


_NAME = re.compile(r"^(?:[A-Z][\w'’-]*[a-z][\w'’-]*|[A-Z]{2,}|\d+(?:[.,]\d+)?)$")


def query_entities(words: str) -> list[str]:
    """Names and numbers in the query (lexemes): capitalised words after the first,
    acronyms, and numbers. Their lexemes, lower-cased as the english config stores them."""
    tokens = words.split()
    found = []
    for i, token in enumerate(tokens):
        if not _NAME.match(token):
            continue
        if i == 0 and not (token.isupper() or token[0].isdigit()):
            continue  # a sentence's first word is capitalised anyway
        lexeme = token.casefold()
        if lexeme not in found:
            found.append(lexeme)
    return found


_TERMS = "SELECT DISTINCT lx FROM unnest(tsvector_to_array(to_tsvector('english', %(text)s))) lx"


def _text_sql(where: str, scoring: str, reply_credit: bool) -> str:
    if scoring == "ts_rank_cd":
        base = "SELECT m.id, ts_rank_cd(m.sv, (SELECT q FROM tsq))::float8 AS s FROM m"
    else:
        base = """
            SELECT m.id, sum(
                df.idf * (f.tf * (%(k1)s + 1))
                / (f.tf + %(k1)s * (1 - %(b)s + %(b)s * length(m.sv) / al.avgdl))
            )::float8 AS s
            FROM m
            CROSS JOIN (SELECT greatest(avg(length(sv)), 1)::float8 AS avgdl FROM m) al
            CROSS JOIN LATERAL unnest(m.sv) AS u(lexeme, positions, weights)
            JOIN df ON df.lx = u.lexeme
            CROSS JOIN LATERAL (
                SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf
            ) f
            GROUP BY m.id"""
    if reply_credit:
        # The turn right after a match (its reply) gets a share of the match's score.
        scored = f"""
            SELECT id, sum(s) AS s FROM (
                SELECT id, s FROM sc
                UNION ALL
                SELECT t.id, %(reply_credit)s * sc.s
                FROM sc
                JOIN memory_conversationturn cur ON cur.id = sc.id
                JOIN memory_conversationturn t ON t.workspace_id = cur.workspace_id
                     AND t.session_id = cur.session_id AND t.turn_index = cur.turn_index + 1
                WHERE {where}
            ) u GROUP BY id"""
    else:
        scored = "SELECT id, s FROM sc"
    return f"""
    m AS MATERIALIZED (
        SELECT t.id, t.search_vector AS sv FROM memory_conversationturn t
        WHERE {where} AND t.search_vector @@ (SELECT q FROM tsq)
        LIMIT %(text_cap)s
    ),
    scope_n AS MATERIALIZED (
        SELECT count(*)::float8 AS n FROM (
            SELECT 1 FROM memory_conversationturn t WHERE {where} LIMIT %(n_cap)s
        ) s
    ),
    df AS MATERIALIZED (
        SELECT terms.lx, ln(1 + (sn.n - d.df + 0.5) / (d.df + 0.5)) AS idf
        FROM ({_TERMS}) terms
        CROSS JOIN scope_n sn
        CROSS JOIN LATERAL (
            SELECT count(*)::float8 AS df FROM (
                SELECT 1 FROM memory_conversationturn t
                WHERE {where} AND t.search_vector @@ quote_literal(terms.lx)::tsquery
                LIMIT %(df_cap)s
            ) c
        ) d
    ),
    sc AS MATERIALIZED ({base}),
    txt AS MATERIALIZED (
        SELECT id, s, row_number() OVER (ORDER BY s DESC, id) AS rank FROM (
            {scored} ORDER BY s DESC, id LIMIT %(n)s
        ) x
    ),"""


def turn_search_sql(
    *,
    where: str,
    use_vector: bool,
    use_text: bool,
    scoring: str,
    fusion: str,
    reply_credit: bool = False,
    time_window: TimeWindow | None = None,
    entities: bool = False,
):
    """The fused statement (see the module docstring)."""
    parts = [
        "WITH tsq AS MATERIALIZED (SELECT (SELECT coalesce(string_agg(quote_literal(lx), ' | '), "
        f"'')::tsquery FROM ({_TERMS}) terms) AS q),"
    ]
    if use_vector:

        def nearest(order: str, extra: str = "") -> str:
            return f"""
            SELECT t.id, t.embedding <=> %(qvec)s::vector AS dist
            FROM memory_conversationturn t
            WHERE {where} AND t.embedding IS NOT NULL AND t.embedding_model = %(emodel)s{extra}
            ORDER BY {order}
            LIMIT %(n)s"""

        parts.append(f"vec_index AS MATERIALIZED ({nearest('t.embedding <=> %(qvec)s::vector')}),")
        exact = nearest(
            "(t.embedding <=> %(qvec)s::vector) + 0", " AND NOT EXISTS (SELECT 1 FROM vec_index)"
        )
        parts.append(f"""
        vec AS MATERIALIZED (
            SELECT id, (1 - dist)::float8 AS s, row_number() OVER (ORDER BY dist, id) AS rank
            FROM (SELECT * FROM vec_index UNION ALL SELECT * FROM ({exact}) exact) v
            WHERE 1 - dist >= %(min_sim)s
        ),""")
    else:
        parts.append(
            "vec AS (SELECT NULL::bigint AS id, NULL::float8 AS s, NULL::bigint AS rank "
            "WHERE false),"
        )
    if use_text:
        parts.append(_text_sql(where, scoring, reply_credit))
    else:
        parts.append(
            "m AS (SELECT NULL::bigint AS id WHERE false),"
            "txt AS (SELECT NULL::bigint AS id, NULL::float8 AS s, NULL::bigint AS rank "
            "WHERE false),"
        )
    if fusion == "score":
        relevance = """(
            %(w_vec)s * coalesce(
                (vec.s - (SELECT min(s) FROM vec))
                / nullif((SELECT max(s) FROM vec) - (SELECT min(s) FROM vec), 0), 1)
                * (vec.id IS NOT NULL)::int
          + %(w_text)s * coalesce(txt.s / nullif((SELECT max(s) FROM txt), 0), 0)
        ) / (%(w_vec)s + %(w_text)s)"""
    else:
        relevance = """(coalesce(%(w_vec)s / (%(rrf_k)s + vec.rank), 0)
              + coalesce(%(w_text)s / (%(rrf_k)s + txt.rank), 0)) * %(rrf_norm)s"""
    if time_window is None:
        time_boost = "0"
    elif time_window.month is not None:
        time_boost = (
            "%(time_boost)s * (extract(month FROM t.created_at AT TIME ZONE 'UTC') "
            "= %(tw_month)s)::int"
        )
    else:
        time_boost = (
            "%(time_boost)s * (t.created_at >= %(tw_start)s AND t.created_at < %(tw_end)s)::int"
        )
    # Names and numbers of the query found in the turn: a share of the boost each.
    entity_boost = (
        "%(entity_boost)s * (SELECT count(*) FROM unnest(%(entities)s::text[]) e "
        "WHERE t.search_vector @@ plainto_tsquery('english', e))::float8 / %(entity_n)s"
        if entities
        else "0"
    )
    parts.append(f"""
    fused AS (
        SELECT c.id, vec.rank AS vector_rank, txt.rank AS text_rank, {relevance} AS relevance
        FROM (SELECT id FROM vec UNION SELECT id FROM txt) c
        LEFT JOIN vec ON vec.id = c.id
        LEFT JOIN txt ON txt.id = c.id
    )
    SELECT * FROM (
        SELECT t.id, t.session_id, t.role, t.turn_index, t.context, t.created_at, t.content,
               f.vector_rank, f.text_rank,
               (f.relevance + %(session_boost)s * (
                    sum(f.relevance) OVER (PARTITION BY t.session_id) - f.relevance)
                  + {time_boost} + {entity_boost})::float8 AS relevance,
               (SELECT count(*) FROM m)
                 + (SELECT count(*) FROM fused WHERE fused.id NOT IN (SELECT id FROM m))
                 AS total
        FROM fused f JOIN memory_conversationturn t ON t.id = f.id
    ) r
    ORDER BY r.relevance DESC, r.created_at DESC, r.id DESC
    LIMIT %(top_k)s""")
    return "\n".join(parts)


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
    now: datetime | None = None,
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
    # Each list holds at most CANDIDATES_MAX rows (HNSW's ef_search tops out at 1000):
    # a page deeper than the ranked window is empty.
    n = tuning.get("candidates") or min(
        max(fetch * settings.CAIRN_RECALL_CANDIDATE_FACTOR, settings.CAIRN_TURN_CANDIDATE_MIN),
        CANDIDATES_MAX,
    )
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
    if not (use_vector or use_text):
        return TurnSearchResult(hits=[], count=0)
    reply_credit = float(tuning.get("reply_credit", settings.CAIRN_TURN_REPLY_CREDIT))
    time_boost = float(tuning.get("time_boost", settings.CAIRN_TURN_TIME_BOOST))
    window = query_time_window(query, now=now or timezone.now()) if time_boost > 0 else None
    entity_boost = float(tuning.get("entity_boost", settings.CAIRN_TURN_ENTITY_BOOST))
    entities = query_entities(words) if entity_boost > 0 else []
    sql = turn_search_sql(
        where=where,
        use_vector=use_vector,
        use_text=use_text,
        scoring=scoring,
        fusion=fusion,
        reply_credit=reply_credit > 0,
        time_window=window,
        entities=bool(entities),
    )
    rrf_k = int(settings.CAIRN_RECALL_RRF_K)
    params.update(
        {
            "qvec": vector_literal(query_embedding) if use_vector else None,
            "emodel": get_embedder().model_id if use_vector else "",
            "text": words,
            "n": n,
            "w_vec": float(w_vec) if use_vector else 0.0,
            "w_text": float(w_text) if use_text else 0.0,
            "rrf_k": rrf_k,
            "rrf_norm": (rrf_k + 1)
            / ((w_vec if use_vector else 0.0) + (w_text if use_text else 0.0)),
            "top_k": int(fetch),
            "text_cap": int(settings.CAIRN_RECALL_TEXT_MATCH_CAP),
            "n_cap": 100_000,
            "df_cap": int(settings.CAIRN_TURN_BM25_DF_CAP),
            "k1": float(settings.CAIRN_TURN_BM25_K1),
            "b": float(settings.CAIRN_TURN_BM25_B),
            "reply_credit": reply_credit,
            "time_boost": time_boost,
            "entity_boost": entity_boost,
            "entities": entities,
            "entity_n": max(len(entities), 1),
            "tw_start": window.start if window else None,
            "tw_end": window.end if window else None,
            "tw_month": window.month if window else None,
            "session_boost": float(tuning.get("session_boost", settings.CAIRN_TURN_SESSION_BOOST)),
            "min_sim": float(
                tuning.get("min_similarity", settings.CAIRN_TURN_VECTOR_MIN_SIMILARITY)
            ),
        }
    )
    with transaction.atomic(), connection.cursor() as cursor:
        if use_vector:
            set_vector_search(cursor, ef_search=max(settings.CAIRN_RECALL_EF_SEARCH, n))
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    hits = [TurnHit(*row[:10]) for row in rows]
    total = int(rows[0][10]) if rows else 0
    if rerank_url and len(hits) > 1:
        hits = _reranked(words or query, hits)
    return TurnSearchResult(hits=hits[:top_k], count=total)


def _reranked(query: str, hits: list[TurnHit]) -> list[TurnHit]:
    """The first CAIRN_RERANK_CANDIDATES hits in the reranker's order, then the rest."""
    head, tail = hits[: settings.CAIRN_RERANK_CANDIDATES], hits[settings.CAIRN_RERANK_CANDIDATES :]
    scores = rerank_scores(query, [h.content for h in head])
    if scores is None:
        return hits  # the reranker failed: the fused order stands
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    out = []
    for i in order:
        head[i].reranked = True
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


def turns_group_sessions(hits: list[TurnHit], *, per_session: int = 3) -> list[SessionHit]:
    """Sessions ranked by their best turn plus a share of their second best."""
    by_session: dict[str, list[TurnHit]] = {}
    for hit in hits:
        by_session.setdefault(hit.session_id, []).append(hit)
    second = settings.CAIRN_TURN_SESSION_SECOND_WEIGHT
    sessions = []
    for session_id, turns in by_session.items():
        scores = sorted((h.relevance for h in turns), reverse=True)
        score = scores[0] + second * (scores[1] if len(scores) > 1 else 0.0)
        sessions.append(
            SessionHit(
                session_id=session_id, score=score, hits=turns[:per_session], matches=len(turns)
            )
        )
    sessions.sort(key=lambda s: (-s.score, s.session_id))
    return sessions


@dataclass(frozen=True)
class ConversationSearchResult:
    page: Page
    mode: str
    sessions: list[SessionHit] | None = None


# group=session ranks sessions from at most this many of the best turns.
SESSION_GROUP_TURNS_MAX = 500


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
) -> ConversationSearchResult:
    """Turns (or sessions, ``group="session"``) for ``q``, best first, with snippets.

    Ranked by ``turn_search`` (vector and BM25 full text fused). ``-word``
    exclusions hold on both sides. ``mode`` is ``all`` when some turn in scope
    matches every word (``websearch_to_tsquery``), else ``any``. ``count`` is the
    number of ranked candidates: turns matching any word (at most
    CAIRN_RECALL_TEXT_MATCH_CAP) plus those found by meaning alone; with
    ``group="session"``, the number of sessions among the best turns.
    ``neighbours`` (0..3) attaches the turns just before and after each hit.
    """
    limit = page_size(limit)
    scope = dict(
        session_id=session_id, context=context, role=role, time_from=time_from, time_to=time_to
    )
    words, _excluded = split_query(q)
    try:
        vector = get_embedder().embed_one(_NEGATED.sub(" ", q).strip() or q)
    except EmbeddingError:
        logger.exception("query embedding failed; conversation search uses full text only")
        vector = None
    if group == "session":
        depth = min(max((offset + limit) * 10, 50), SESSION_GROUP_TURNS_MAX)
    else:
        depth = offset + limit
    found = turn_search(workspace=workspace, query=q, query_embedding=vector, top_k=depth, **scope)
    sessions = None
    if group == "session":
        grouped = turns_group_sessions(found.hits)
        sessions = grouped[offset : offset + limit]
        items = [hit for s in sessions for hit in s.hits]
        count = len(grouped)
    else:
        items = found.hits[offset : offset + limit]
        count = found.count
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
    _attach_snippets(items, any_word_query(q) or every)
    turns_attach_neighbours(workspace=workspace, hits=items, neighbours=neighbours)
    if sessions is not None:
        page = Page(items=sessions, count=count, limit=limit, offset=offset)
    else:
        page = Page(items=items, count=max(count, offset + len(items)), limit=limit, offset=offset)
    return ConversationSearchResult(page=page, mode=mode, sessions=sessions)


def _attach_snippets(hits: list[TurnHit], query: SearchQuery) -> None:
    if not hits:
        return
    snippets = dict(
        ConversationTurn.objects.filter(pk__in=[h.id for h in hits])
        .annotate(snippet=SearchHeadline("content", query, config="english", **SNIPPET_OPTIONS))
        .values_list("id", "snippet")
    )
    for hit in hits:
        hit.snippet = snippets.get(hit.id, "")
