"""pgvector search as every nearest-neighbour statement runs it: the vector's text
form, the HNSW settings scoped to one transaction, plans made for each search's own
values, and the vector list of a fused statement that reads a small scope exactly.

Knowledge recall, turn search, dedup (one item and a batch) and the reconcile job
all search this way."""

from __future__ import annotations

import functools
import struct

import numpy as np
from django.conf import settings
from psycopg.adapt import Dumper
from psycopg.pq import Format

from memory.knowledge.text_stats import WORKSPACE_ROWS_SQL


@functools.lru_cache(maxsize=4)
def _vector_format(dimensions: int) -> str:
    return "[" + ",".join(["%.9g"] * dimensions) + "]"


def vector_literal(vector) -> str:
    """pgvector's text form, for a ``%s::vector`` parameter.

    Nine significant digits: every float32 (what pgvector stores) reads back as
    itself, in a third of the time and two thirds of the text that ``repr`` of
    its float64 takes (about 0.35 ms a 384-dimension vector instead of 1 ms).
    """
    values = vector.tolist() if hasattr(vector, "tolist") else list(vector)
    return _vector_format(len(values)) % tuple(values)


class VectorArray:
    """Many vectors as one ``vector[]`` parameter: sent in PostgreSQL's binary array
    form (``data``); written out as text only where a statement is shown (the debug
    log of the SQL run)."""

    __slots__ = ("data", "vectors")

    def __init__(self, data: bytes, vectors: list):
        self.data, self.vectors = data, vectors


# The oid of pgvector's type, by database (it is the extension's, fixed once created).
_VECTOR_OIDS: dict[str, tuple[int, int]] = {}


def _binary_array(vectors: list, element_oid: int) -> bytes:
    """The wire form of a one-dimensional ``vector[]``: a header, then each element
    as its length and pgvector's binary form (dimensions, 0, big-endian float4s);
    NULL for a missing vector. Built by numpy, not float by float."""
    n = len(vectors)
    if not n:
        return struct.pack(">iii", 0, 0, element_oid)
    present = [v for v in vectors if v is not None]
    sizes = {len(v) for v in present}
    header = struct.pack(">iiiii", 1, int(len(present) < n), element_oid, n, 1)
    if len(present) == n and len(sizes) == 1:
        dims = sizes.pop()
        rows = np.empty(
            n, dtype=[("len", ">i4"), ("dim", ">u2"), ("unused", ">u2"), ("v", ">f4", (dims,))]
        )
        rows["len"], rows["dim"], rows["unused"] = 4 + 4 * dims, dims, 0
        rows["v"] = np.asarray(vectors, dtype=np.float32)
        return header + rows.tobytes()
    parts = [header]
    for v in vectors:
        if v is None:
            parts.append(struct.pack(">i", -1))
        else:
            values = np.asarray(v, dtype=">f4")
            parts.append(struct.pack(">iHH", 4 + 4 * len(values), len(values), 0))
            parts.append(values.tobytes())
    return b"".join(parts)


def vectors_param(cursor, vectors: list):
    """Many vectors (None for none) as one parameter, for ``%s::vector[]``.

    When the server binds parameters (``CAIRN_DB_PREPARE``, the default) they travel
    in binary, built in microseconds; formatting a 384-dimension vector as text and
    parsing it back costs about 0.5 ms, which a batch of 100 short items paid twice
    (its dedup read and its insert). Otherwise, pgvector's text form.
    """
    if not cursor.db.settings_dict["OPTIONS"].get("server_side_binding"):
        return [None if v is None else vector_literal(v) for v in vectors]
    name = cursor.db.settings_dict["NAME"]
    if name not in _VECTOR_OIDS:
        cursor.execute("SELECT 'vector'::regtype::oid, 'vector[]'::regtype::oid")
        _VECTOR_OIDS[name] = cursor.fetchone()
    element_oid, array_oid = _VECTOR_OIDS[name]
    text = type("VectorArrayText", (_VectorArrayText,), {"oid": array_oid})
    binary = type("VectorArrayBinary", (_VectorArrayBinary,), {"oid": array_oid})
    # On the cursor that runs the statement, and on its connection, whose cursors show
    # statements with their values (Django's query log); binary last: it is the one
    # a ``%s`` placeholder takes.
    for adapters in (cursor.db.connection.adapters, cursor.cursor.adapters):
        adapters.register_dumper(VectorArray, text)
        adapters.register_dumper(VectorArray, binary)
    return VectorArray(_binary_array(vectors, element_oid), vectors)


class _VectorArrayBinary(Dumper):
    format = Format.BINARY

    def dump(self, obj: VectorArray) -> bytes:
        return obj.data


class _VectorArrayText(Dumper):
    format = Format.TEXT

    def dump(self, obj: VectorArray) -> bytes:
        return (
            "{"
            + ",".join("NULL" if v is None else f'"{vector_literal(v)}"' for v in obj.vectors)
            + "}"
        ).encode()


# For the current transaction: each prepared search statement planned for its values.
_CUSTOM_PLANS = "set_config('plan_cache_mode', 'force_custom_plan', true)"


def set_vector_search(cursor, *, ef_search: int, iterative_scan: str | None = None) -> None:
    """Scope HNSW search parameters to the current transaction (``SET LOCAL``).

    Also ``plan_cache_mode``: a search statement is prepared on the server like any
    other (settings.py, ``CAIRN_DB_PREPARE``), but is planned for its own values each
    time (its LIMIT, its scope), never by a generic plan made for any values.
    """
    cursor.execute(
        "SELECT set_config('hnsw.ef_search', %(ef)s, true), " + _SEARCH_SETTINGS,
        {"ef": str(int(ef_search)), **_search_params(iterative_scan)},
    )


# The settings every search sets besides its walk (``set_vector_search``).
_SEARCH_SETTINGS = (
    "set_config('hnsw.iterative_scan', %(scan)s, true), "
    "set_config('hnsw.max_scan_tuples', %(tuples)s, true), " + _CUSTOM_PLANS
)


def _search_params(iterative_scan: str | None = None) -> dict:
    return {
        "scan": iterative_scan or settings.CAIRN_RECALL_ITERATIVE_SCAN,
        "tuples": str(int(settings.CAIRN_RECALL_MAX_SCAN_TUPLES)),
    }


#: ``ef_search_for_rows`` in SQL, over the workspace's kept row count (text_stats), so a
#: recall sets its walk in the statement that sets the other search settings.
_EF_FOR_WORKSPACE = f"""
    SELECT CASE WHEN r.n <= %(grow_from)s THEN greatest(%(base)s, %(floor)s)
           ELSE greatest(%(floor)s, %(base)s, least(%(max)s,
                round(%(base)s * power(r.n::float8 / %(grow_from)s, %(growth)s))::int))
           END::text
    FROM ({WORKSPACE_ROWS_SQL}) r
"""


def set_vector_search_for_workspace(cursor, *, workspace_id: int, floor: int) -> None:
    """``set_vector_search`` with the walk ``ef_search_for_rows`` gives the workspace's
    recallable rows (at least ``floor``), read and set in one statement."""
    cursor.execute(
        f"SELECT set_config('hnsw.ef_search', ({_EF_FOR_WORKSPACE}), true), " + _SEARCH_SETTINGS,
        {
            "workspace_id": workspace_id,
            "floor": int(floor),
            "base": int(settings.CAIRN_RECALL_EF_SEARCH),
            "grow_from": max(1, int(settings.CAIRN_RECALL_EF_SEARCH_GROW_FROM)),
            "growth": float(settings.CAIRN_RECALL_EF_SEARCH_GROWTH),
            "max": int(settings.CAIRN_RECALL_EF_SEARCH_MAX),
            **_search_params(),
        },
    )


def ef_search_for_rows(rows: int) -> int:
    """The HNSW walk's breadth for a scope of ``rows`` rows: ``CAIRN_RECALL_EF_SEARCH``
    up to ``CAIRN_RECALL_EF_SEARCH_GROW_FROM`` rows, then growing as
    ``(rows / grow_from) ** CAIRN_RECALL_EF_SEARCH_GROWTH``, at most
    ``CAIRN_RECALL_EF_SEARCH_MAX``.

    Why: on clustered data a walk of 100 found 0.99 of the exact 10 nearest at
    100,000 rows but 0.80 at a million, where 400 found 0.95 (docs/benchmarks/
    scale.md); a flat 400 would cost every small scope a wider walk for nothing.
    With the defaults (100, from 100,000, exponent 0.6, at most 400) a million rows
    get 398, and a workspace below 100,000 rows walks as before.
    """
    base = int(settings.CAIRN_RECALL_EF_SEARCH)
    grow_from = max(1, int(settings.CAIRN_RECALL_EF_SEARCH_GROW_FROM))
    if rows <= grow_from:
        return base
    grown = base * (rows / grow_from) ** float(settings.CAIRN_RECALL_EF_SEARCH_GROWTH)
    return max(base, min(int(settings.CAIRN_RECALL_EF_SEARCH_MAX), int(round(grown))))


def plan_for_these_values(cursor) -> None:
    """``plan_cache_mode`` alone, for a search without vector settings: a prepared
    search statement is planned for its own values every time (a generic plan of the
    session-coverage statement took 250 ms where its custom plan takes 20-60, on
    100,000 turns)."""
    cursor.execute("SELECT " + _CUSTOM_PLANS)


def nearest_rows(scope: str, distance: str) -> tuple[str, str]:
    """The vector list of a fused statement: the ``vec_scope`` and ``vec_index``
    CTEs, and the rows to rank (a FROM item of ``id, dist``).

    ``scope`` is the rows to search, ``FROM <table> <alias> WHERE …`` (``id`` among
    its columns); ``distance`` is the distance expression. The scope is answered
    exactly (ordered by an expression the index cannot serve, read through the
    btree filters) when it holds fewer than %(exact_below)s rows
    (``CAIRN_RECALL_EXACT_BELOW``), or when the HNSW walk brings back fewer than
    %(n)s rows. Otherwise the walk's rows are the list.

    Why a small scope is not walked: the index is shared by every workspace, and
    rows deleted but not yet vacuumed stay in its graph. When they crowd a query's
    neighbourhood (a workspace's 220 items also stored 80 times elsewhere and
    deleted), the walk still brought back %(n)s rows of the scope, but not its
    nearest: the advice questions of issue 17 found 3 of their 20 answers in the
    top 3 instead of 7. Reading 1,000 rows exactly cost 5.4 ms against 5.0 for
    the walk (README, Benchmarks), and cannot miss. The walk comes back short
    when its ef_search candidates were filtered out or it stopped at
    ``hnsw.max_scan_tuples``.

    Both checks are uncorrelated subqueries, one-time filters: the walk runs only
    for a large scope, the exact scan only when it is needed.
    """
    small = "(SELECT small FROM vec_scope)"
    short = "(SELECT count(*) FROM vec_index) < %(n)s"

    def nearest(order: str, extra: str) -> str:
        return f"SELECT id, {distance} AS dist {scope}{extra} ORDER BY {order} LIMIT %(n)s"

    ctes = f"""vec_scope AS MATERIALIZED (
            SELECT count(*) < %(exact_below)s AS small
            FROM (SELECT 1 {scope} LIMIT %(exact_below)s) s
        ),
        vec_index AS MATERIALIZED ({nearest(distance, f" AND NOT {small}")}),"""
    rows = f"""(
            SELECT * FROM vec_index WHERE NOT {short}
            UNION ALL
            SELECT * FROM ({nearest(f"({distance}) + 0", f" AND {short}")}) exact
        )"""
    return ctes, rows


def nearest_rows_params() -> dict:
    """The parameter ``nearest_rows``' SQL reads beyond its caller's (``n``, the query
    vector): read at each search, so a changed setting takes effect at once."""
    return {"exact_below": int(settings.CAIRN_RECALL_EXACT_BELOW)}
