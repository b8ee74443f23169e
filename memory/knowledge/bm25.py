"""BM25 over PostgreSQL full text, shared by knowledge recall (memory/knowledge/recall.py)
and conversation-turn search (memory/knowledge/turn_sql.py).

Each query lexeme's idf comes from a capped count of the scope's rows holding it
(one GIN look-up per lexeme), its term frequency from the tsvector's positions,
the document length from the tsvector's size, normalised by the matches' average.
Parameters: %(text)s (the query's words), %(text_cap)s, %(n_cap)s, %(df_cap)s,
%(k1)s and %(b)s; a ``tsq`` CTE holding the any-word query must come first.
"""

from __future__ import annotations

from django.conf import settings

#: The query's distinct lexemes (english configuration).
TERMS_SQL = "SELECT DISTINCT lx FROM unnest(tsvector_to_array(to_tsvector('english', %(text)s))) lx"


def bm25_ctes(
    *,
    table: str,
    alias: str,
    where: str,
    scoring: str = "bm25",
    idf: str | None = None,
    small: str | None = None,
) -> str:
    """CTEs ``m`` (the matches, at most %(text_cap)s), ``scope_n``, ``df`` (each query
    lexeme's idf over the scope) and ``sc`` (each match's score), each followed by a
    comma. ``scoring="ts_rank_cd"`` scores by PostgreSQL's cover density instead
    (no idf: a word found in every row counts as much as a rare one).

    A score is the same to the last bit whatever plan found the matches: its terms
    are summed in lexeme order (floating-point addition depends on the order), and
    the average length is exact (``avg`` of integers is a numeric).

    ``idf``: CTEs ``scope_n`` and ``df`` to use instead of counting the scope (knowledge
    recall reads them from per-workspace statistics, memory/knowledge/text_stats.py).
    ``small``: a one-time SQL condition (an uncorrelated subquery) that the scope is
    small; then its rows, read through the scope's btree filters, are each matched
    against the query (an expression the GIN index cannot serve), instead of a GIN
    bitmap built from every workspace's rows holding the query's words. A small
    scope is below the match cap, so both ways take every match: the same ``m``."""
    if scoring == "ts_rank_cd":
        score = "SELECT m.id, ts_rank_cd(m.sv, (SELECT q FROM tsq))::float8 AS s FROM m"
    else:
        score = """
        SELECT m.id, sum(
            df.idf * (f.tf * (%(k1)s + 1))
            / (f.tf + %(k1)s * (1 - %(b)s + %(b)s * length(m.sv) / al.avgdl))
            ORDER BY u.lexeme
        )::float8 AS s
        FROM m
        CROSS JOIN (SELECT greatest(avg(length(sv)), 1)::float8 AS avgdl FROM m) al
        CROSS JOIN LATERAL unnest(m.sv) AS u(lexeme, positions, weights)
        JOIN df ON df.lx = u.lexeme
        CROSS JOIN LATERAL (
            SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf
        ) f
        GROUP BY m.id"""
    a = alias
    matches = f"""
        SELECT {a}.id, {a}.search_vector AS sv FROM {table} {a}
        WHERE {where} AND {a}.search_vector @@ (SELECT q FROM tsq)"""
    if small is not None:
        matches = f"""({matches} AND NOT {small}
        LIMIT %(text_cap)s)
        UNION ALL
        (SELECT {a}.id, {a}.search_vector AS sv FROM {table} {a}
        WHERE {where} AND {small}
          AND coalesce({a}.search_vector, ''::tsvector) @@ (SELECT q FROM tsq)
        LIMIT %(text_cap)s)"""
    else:
        matches += """
        LIMIT %(text_cap)s"""
    if idf is None:
        idf = idf_ctes(table=table, alias=alias, where=where)
    return f"""
    m AS MATERIALIZED ({matches}
    ),{idf}
    sc AS MATERIALIZED ({score}),"""


def idf_ctes(*, table: str, alias: str, where: str) -> str:
    """CTEs ``scope_n`` (the scope's rows, at most %(n_cap)s) and ``df`` (each query
    lexeme ``lx`` with its ``idf`` over the scope), each followed by a comma."""
    a = alias
    return f"""
    scope_n AS MATERIALIZED (
        SELECT count(*)::float8 AS n FROM (
            SELECT 1 FROM {table} {a} WHERE {where} LIMIT %(n_cap)s
        ) s
    ),
    df AS MATERIALIZED (
        SELECT terms.lx, ln(1 + (sn.n - d.df + 0.5) / (d.df + 0.5)) AS idf
        FROM ({TERMS_SQL}) terms
        CROSS JOIN scope_n sn
        CROSS JOIN LATERAL (
            SELECT count(*)::float8 AS df FROM (
                SELECT 1 FROM {table} {a}
                WHERE {where} AND {a}.search_vector @@ quote_literal(terms.lx)::tsquery
                LIMIT %(df_cap)s
            ) c
        ) d
    ),"""


def bm25_params(*, scope_cap: int, df_cap: int) -> dict:
    """The parameters ``bm25_ctes`` needs besides %(text)s: the match cap, the caps of
    the scope and per-word counts behind each idf, and k1 and b."""
    return {
        "text_cap": int(settings.CAIRN_RECALL_TEXT_MATCH_CAP),
        "n_cap": int(scope_cap),
        "df_cap": int(df_cap),
        "k1": float(settings.CAIRN_TURN_BM25_K1),
        "b": float(settings.CAIRN_TURN_BM25_B),
    }
