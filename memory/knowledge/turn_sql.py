"""The SQL of turn search (memory/knowledge/turn_search.py explains the ranking):
the shared filters, the query's words, names and numbers, BM25 over the GIN index,
and the fused statement with its lifts."""

from __future__ import annotations

import re
from datetime import datetime

from memory.core.text import WORD
from memory.knowledge.bm25 import TERMS_SQL, bm25_ctes, idf_ctes
from memory.knowledge.time_words import TimeWindow
from memory.knowledge.vector_search import nearest_rows

NEGATED = re.compile(r"(?:^|\s)-(\w+)")


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
    excluded = sorted({w.casefold() for w in NEGATED.findall(q)})
    words = [w for w in WORD.findall(NEGATED.sub(" ", q))]
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


def _text_sql(where: str, scoring: str, reply_credit: bool) -> str:
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
    return f"""{bm25_ctes(table="memory_conversationturn", alias="t", where=where, scoring=scoring)}
    txt_all AS MATERIALIZED ({scored}),
    txt AS MATERIALIZED (
        SELECT id, s, row_number() OVER (ORDER BY s DESC, id) AS rank FROM (
            SELECT id, s FROM txt_all ORDER BY s DESC, id LIMIT %(n)s
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
    answer: bool = False,
):
    """The fused statement (see the module docstring)."""
    parts = [
        "WITH tsq AS MATERIALIZED (SELECT (SELECT coalesce(string_agg(quote_literal(lx), ' | '), "
        f"'')::tsquery FROM ({TERMS_SQL}) terms) AS q),"
    ]
    if use_vector:
        vec_index, rows = nearest_rows(
            f"""FROM memory_conversationturn t
            WHERE {where} AND t.embedding IS NOT NULL AND t.embedding_model = %(emodel)s""",
            "t.embedding <=> %(qvec)s::vector",
        )
        parts.append(vec_index)
        parts.append(f"""
        vec AS MATERIALIZED (
            SELECT id, (1 - dist)::float8 AS s, row_number() OVER (ORDER BY dist, id) AS rank
            FROM {rows} v
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
            "txt_all AS (SELECT NULL::bigint AS id, NULL::float8 AS s WHERE false),"
            "txt AS (SELECT NULL::bigint AS id, NULL::float8 AS s, NULL::bigint AS rank "
            "WHERE false),"
        )
    both = ""
    if fusion == "score":
        # Every candidate gets both scores, whether or not it made the other list's first
        # n: its cosine similarity scaled from the floor of relatedness (the vector-only
        # cut, CAIRN_TURN_VECTOR_MIN_SIMILARITY) to the best candidate's, and its BM25
        # (with the reply credit) over the best match's.
        relevance = """(
            %(w_vec)s * greatest(0, least(1, coalesce(
                (sides.vs - %(min_sim)s) / nullif((SELECT max(s) FROM vec) - %(min_sim)s, 0), 1)))
                * (sides.vs IS NOT NULL)::int
          + %(w_text)s * coalesce(sides.ts / nullif((SELECT max(s) FROM txt), 0), 0)
        ) / (%(w_vec)s + %(w_text)s)"""
        vs = (
            "CASE WHEN ft.embedding_model = %(emodel)s "
            "THEN (1 - (ft.embedding <=> %(qvec)s::vector))::float8 END"
            if use_vector
            else "NULL::float8"
        )
        both = f"""
        JOIN memory_conversationturn ft ON ft.id = c.id
        LEFT JOIN txt_all ON txt_all.id = c.id
        CROSS JOIN LATERAL (SELECT {vs} AS vs, txt_all.s AS ts) sides"""
    elif fusion == "minmax":
        # Each list's scores scaled over its own candidates; a turn missing from one
        # list scores 0 on that side.
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
    else:
        # Soft: a turn said within the window (its own time, ``at``) is lifted; none is
        # left out.
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
    # A turn that asks keeps part of its relevance and passes a share to its reply
    # (memory/knowledge/answer_kind.py); a turn saying what the question wants is lifted.
    answer_boost = (
        "%(answer_boost)s * (regexp_replace(t.content, %(aside)s, '') ~* %(answer_re)s)::int"
        if answer
        else "0"
    )
    parts.append(f"""
    fused AS MATERIALIZED (
        SELECT c.id, vec.rank AS vector_rank, txt.rank AS text_rank, {relevance} AS relevance
        FROM (SELECT id FROM vec UNION SELECT id FROM txt) c
        LEFT JOIN vec ON vec.id = c.id
        LEFT JOIN txt ON txt.id = c.id{both}
    ),
    asking AS MATERIALIZED (
        SELECT f.*, t.session_id, t.turn_index,
               regexp_replace(t.content, %(aside)s, '') ~ '[?]\\s*$' AS asks
        FROM fused f JOIN memory_conversationturn t ON t.id = f.id
    ),
    passed AS (
        SELECT id, vector_rank, text_rank,
               relevance * (1 - %(question_penalty)s * asks::int) AS relevance
        FROM asking
        UNION ALL
        -- The next turn gets the question credit of a turn that asks; the turn before
        -- gets the before credit of any candidate.
        SELECT t.id, NULL, NULL, side.credit * a.relevance
        FROM asking a
        CROSS JOIN (VALUES (1, %(question_credit)s, true), (-1, %(before_credit)s, false))
             AS side(step, credit, askers_only)
        JOIN memory_conversationturn t ON t.workspace_id = %(workspace_id)s
             AND t.session_id = a.session_id AND t.turn_index = a.turn_index + side.step
        WHERE side.credit > 0 AND (a.asks OR NOT side.askers_only) AND {where}
    ),
    lifted AS (
        SELECT id, min(vector_rank) AS vector_rank, min(text_rank) AS text_rank,
               sum(relevance) AS relevance
        FROM passed GROUP BY id
    )
    SELECT * FROM (
        SELECT t.id, t.session_id, t.role, t.turn_index, t.context, t.created_at, t.content,
               f.vector_rank, f.text_rank,
               (f.relevance + %(session_boost)s * (
                    sum(f.relevance) OVER (PARTITION BY t.session_id) - f.relevance)
                  + {time_boost} + {entity_boost} + {answer_boost})::float8 AS relevance,
               (SELECT count(*) FROM m)
                 + (SELECT count(*) FROM fused WHERE fused.id NOT IN (SELECT id FROM m))
                 AS total,
               (SELECT count(*) FROM vec) AS vec_n, (SELECT count(*) FROM txt) AS txt_n
        FROM lifted f JOIN memory_conversationturn t ON t.id = f.id
    ) r
    ORDER BY r.relevance DESC, r.created_at DESC, r.id DESC
    LIMIT %(top_k)s""")
    return "\n".join(parts)


def session_coverage_sql(where: str) -> str:
    """Each session of %(sessions)s that says some of the query's lexemes, with their
    share of the query weighted by idf over the scope's turns (as BM25 weighs them):
    1.0 when some turn of the session in scope says each word. One GIN look-up per
    lexeme, its turns kept to the sessions asked about."""
    ctes = idf_ctes(table="memory_conversationturn", alias="t", where=where)
    return f"""WITH{ctes}
    held AS (
        SELECT DISTINCT t.session_id, df.lx, df.idf
        FROM df
        JOIN memory_conversationturn t ON t.search_vector @@ quote_literal(df.lx)::tsquery
        WHERE {where} AND t.session_id = ANY(%(sessions)s::text[])
    )
    SELECT session_id, (sum(idf) / nullif((SELECT sum(idf) FROM df), 0))::float8
    FROM held
    GROUP BY session_id"""
