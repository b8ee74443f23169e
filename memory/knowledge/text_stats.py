"""Reading and folding the per-workspace full-text statistics (memory/models/textstats.py).

A workspace's recallable rows (active, not superseded) and, per lexeme, how many of
them hold it are ``memory_textstat`` plus the not yet folded ``memory_textstatdelta``
rows, which statement triggers on ``memory_knowledge`` append on every write
(migration 0007). Every read below adds both, inside one statement, so it sees one
snapshot: exact, with no staleness, whether or not the fold has run. The fold
(``text_stats_fold``, a beat job every ``CAIRN_TEXT_STATS_FOLD_S``) only keeps the
delta table short; if it stops, reads stay exact and grow slower with the deltas.
"""

from __future__ import annotations

from django.db import connection, transaction

from memory.knowledge.bm25 import TERMS_SQL

#: The workspace's counts for the query's lexemes and its row count (lexeme ''), summed
#: over the folded table and the deltas. Parameters: %(workspace_id)s, %(text)s.
_STAT_ROWS = f"""
    text_stat AS MATERIALIZED (
        SELECT lexeme, sum(n)::float8 AS n, sum(n_sensitive)::float8 AS ns FROM (
            SELECT lexeme, n, n_sensitive FROM memory_textstat
            WHERE workspace_id = %(workspace_id)s
              AND lexeme = ANY(ARRAY[''] || ARRAY({TERMS_SQL}))
            UNION ALL
            SELECT lexeme, n, n_sensitive FROM memory_textstatdelta
            WHERE workspace_id = %(workspace_id)s
              AND lexeme = ANY(ARRAY[''] || ARRAY({TERMS_SQL}))
        ) s
        GROUP BY lexeme
    ),"""


#: The workspace's recallable knowledge rows (sensitive ones included), folded and
#: pending counts added: one value. Parameter: %(workspace_id)s.
WORKSPACE_ROWS_SQL = """
    SELECT coalesce(sum(n), 0) AS n FROM (
        SELECT n FROM memory_textstat WHERE workspace_id = %(workspace_id)s AND lexeme = ''
        UNION ALL
        SELECT n FROM memory_textstatdelta WHERE workspace_id = %(workspace_id)s AND lexeme = ''
    ) s"""


def scope_ctes() -> str:
    """CTEs ``text_stat`` and ``text_scope`` (``small``: the workspace holds fewer than
    %(exact_below)s recallable rows, so its text is matched row by row through the
    workspace's btree index instead of the shared GIN index), each followed by a comma."""
    return (
        _STAT_ROWS
        + """
    text_scope AS MATERIALIZED (
        SELECT coalesce((SELECT n FROM text_stat WHERE lexeme = ''), 0) < %(exact_below)s
            AS small
    ),"""
    )


def idf_ctes(*, include_sensitive: bool) -> str:
    """CTEs ``scope_n`` and ``df`` as ``bm25.idf_ctes`` makes them, from the statistics
    instead of counting: the same capped counts (%(n_cap)s, %(df_cap)s), so the same
    idf to the last bit, for a scope that is the whole workspace (recall without a
    context, category, entity or time filter). Needs ``scope_ctes`` before it."""
    count = "n" if include_sensitive else "n - ns"
    return f"""
    scope_n AS MATERIALIZED (
        SELECT least(coalesce((SELECT {count} FROM text_stat WHERE lexeme = ''), 0),
                     %(n_cap)s)::float8 AS n
    ),
    df AS MATERIALIZED (
        SELECT terms.lx, ln(1 + (sn.n - d.df + 0.5) / (d.df + 0.5)) AS idf
        FROM ({TERMS_SQL}) terms
        CROSS JOIN scope_n sn
        CROSS JOIN LATERAL (
            SELECT least(coalesce((SELECT {count} FROM text_stat t WHERE t.lexeme = terms.lx),
                                  0), %(df_cap)s)::float8 AS df
        ) d
    ),"""


# One fold at a time (two would update the same counts in different orders).
_FOLD_LOCK = 0x7465787473746174  # "textstat"

_FOLD_SQL = """
WITH taken AS (
    DELETE FROM memory_textstatdelta
    WHERE id IN (SELECT id FROM memory_textstatdelta ORDER BY id LIMIT %(batch)s)
    RETURNING workspace_id, lexeme, n, n_sensitive
),
summed AS (
    SELECT workspace_id, lexeme, sum(n) AS n, sum(n_sensitive) AS n_sensitive
    FROM taken GROUP BY 1, 2
)
INSERT INTO memory_textstat (workspace_id, lexeme, n, n_sensitive)
SELECT * FROM summed ORDER BY 1, 2
ON CONFLICT (workspace_id, lexeme) DO UPDATE
SET n = memory_textstat.n + excluded.n,
    n_sensitive = memory_textstat.n_sensitive + excluded.n_sensitive
"""


def fold(*, batch: int = 50_000, wait: bool = False) -> dict:
    """Move pending deltas into ``memory_textstat``, ``batch`` rows a transaction, and
    drop counts that reached zero. Returns the rows folded. Readers see the counts
    before or after each transaction, never between: the deltas leave and the counts
    change in one commit. Another fold running: skipped, or with ``wait`` (an erasure,
    which must see the words it erased gone) waited for."""
    folded = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            if wait:
                cursor.execute("SELECT pg_advisory_xact_lock(%s), true", [_FOLD_LOCK])
            else:
                cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [_FOLD_LOCK])
            if not cursor.fetchone()[-1]:
                return {"folded": folded, "skipped": 1}
            cursor.execute(_FOLD_SQL, {"batch": batch})
            done = cursor.rowcount
            cursor.execute("DELETE FROM memory_textstat WHERE n = 0 AND n_sensitive = 0")
        folded += done
        if done == 0:
            return {"folded": folded}


def rebuild() -> None:
    """Count every workspace again from ``memory_knowledge`` (after a bulk load with the
    triggers disabled, or to check the kept counts: tests compare the two)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("LOCK TABLE memory_textstatdelta, memory_textstat IN EXCLUSIVE MODE")
        cursor.execute("DELETE FROM memory_textstatdelta")
        cursor.execute("DELETE FROM memory_textstat")
        cursor.execute(COUNT_ALL_SQL)


#: Every workspace's counts, from the knowledge table itself.
COUNT_SQL = """
SELECT k.workspace_id, l.lx AS lexeme, count(*) AS n,
       count(*) FILTER (WHERE k.sensitive) AS n_sensitive
FROM memory_knowledge k
CROSS JOIN LATERAL (
    SELECT '' UNION ALL SELECT unnest(tsvector_to_array(k.search_vector))
) l(lx)
WHERE k.status = 'active' AND k.superseded_by_id IS NULL
GROUP BY 1, 2
"""

COUNT_ALL_SQL = "INSERT INTO memory_textstat (workspace_id, lexeme, n, n_sensitive)" + COUNT_SQL
