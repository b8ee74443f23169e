"""Hot-path rows through statements written once: inserts, and reads by a queryset.

``Model.objects.create`` builds and compiles the same INSERT on every call; on a
hot path (an outcome per agent turn) that compiling cost more than the write.
``row_insert`` writes each field's value exactly as the ORM would (``pre_save``,
so ``auto_now_add`` works; ``get_db_prep_save``, so JSON and times are adapted)
into a statement made once per model. ``row_insert_keyed`` does the same in one
statement with other writes (CTEs) and the new key written into a JSON field;
``row_insert_for_each`` is such a CTE. No ``pre_save``/``post_save`` signals are
sent: use them only for models nothing listens to. ``PreparedQuery`` reads what a
queryset reads, compiled once.
"""

from __future__ import annotations

import functools

from django.db import connection
from django.db.models import NOT_PROVIDED, Field, IntegerField, Lookup, Model


@functools.cache
def _insert(model: type[Model]) -> tuple[str, tuple[Field, ...]]:
    pk = model._meta.pk
    fields = tuple(f for f in model._meta.concrete_fields if f is not pk)
    for f in fields:
        if getattr(f, "generated", False) or f.db_default is not NOT_PROVIDED:
            raise TypeError(
                f"row_insert does not handle {model.__name__}.{f.name}'s database default"
            )
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} ({_columns(fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))}) RETURNING {quote(pk.column)}"
    )
    return sql, fields


def _columns(fields) -> str:
    return ", ".join(connection.ops.quote_name(f.column) for f in fields)


def _values(obj: Model, fields) -> list:
    """Each field's value of ``obj`` as the ORM writes it (``pre_save`` for an insert)."""
    return [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]


# Measured (bench/bench_rows.py, bench/results/rows.md): an outcome's row in 159 us
# against 243 us by Model.objects.create (1.5x) and 466 us by bulk_create (1.75x).
# The gain is the ORM's compile; a commit that waits for the disk costs more than
# either on a slow disk, so it shows most when commits are cheap.
def row_insert(obj: Model) -> Model:
    """Insert ``obj`` (unsaved, its primary key left to the database); returns it saved."""
    sql, fields = _insert(type(obj))
    with connection.cursor() as cursor:
        cursor.execute(sql, _values(obj, fields))
        obj.pk = cursor.fetchone()[0]
    _saved(obj)
    return obj


def _saved(obj: Model) -> None:
    obj._state.adding = False
    obj._state.db = connection.alias


@functools.cache
def _insert_keyed(model: type[Model], key_into: str) -> tuple[str, str, tuple[Field, ...]]:
    """``_insert``'s statement drawing the primary key from its sequence first, as
    ``n.id``, and writing it under ``"id"`` in the JSON object of field ``key_into``."""
    _, fields = _insert(model)
    quote = connection.ops.quote_name
    pk = model._meta.pk
    table = model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [quote(table), pk.column])
        sequence = cursor.fetchone()[0]
    head = f"n AS (SELECT nextval('{sequence}'::regclass) AS id)"
    values = [
        "jsonb_set(%s::jsonb, '{id}', to_jsonb((SELECT id FROM n)))"
        if f.attname == key_into
        else "%s"
        for f in fields
    ]
    body = (
        f"INSERT INTO {quote(table)} ({quote(pk.column)}, {_columns(fields)}) "
        f"VALUES ((SELECT id FROM n), {', '.join(values)}) RETURNING {quote(pk.column)}"
    )
    return head, body, fields


# Measured (bench/bench_rows.py): 197 us against 663 us (3.4x) for the ORM's save()
# then QuerySet.update of the key in a transaction; with two evidence links as a CTE,
# 353 us against 2,833 us (8x) for that plus LessonEvidence bulk_create; with the
# project-label CTEs, 255 us against 960 us (3.8x).
def row_insert_keyed(obj: Model, *, key_into: str, also: list[tuple[str, str, list]] = ()) -> Model:
    """Insert ``obj`` as ``row_insert`` does, in one statement that also writes the new
    primary key under ``"id"`` in the JSON object of its field ``key_into`` (a stored
    answer that names its own row, written once instead of inserted then updated).

    ``also``: other data-modifying statements run in the same statement, as CTEs
    ``(name, SQL ending in RETURNING, parameters)``, each able to read the ones
    before it and the new key as ``(SELECT id FROM n)``. Returns ``obj``, saved.
    """
    head, body, fields = _insert_keyed(type(obj), key_into)
    params = []
    for name, sql, more in also:
        head += f", {name} AS ({sql})"
        params += more
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {head} {body}", [*params, *_values(obj, fields)])
        obj.pk = cursor.fetchone()[0]
    getattr(obj, key_into)["id"] = obj.pk
    _saved(obj)
    return obj


# Measured (bench/bench_rows.py): the first label of a project with its audit row,
# in the outcome's statement, 285 us against 919 us (3.2x) for bulk_create(
# ignore_conflicts) of the label and create of the audit row after the outcome's.
def row_insert_for_each(obj: Model, *, source: str) -> tuple[str, list]:
    """SQL and parameters inserting ``obj`` (as ``row_insert`` writes it) once for each
    row of ``source``, a CTE of the caller's statement; ``RETURNING`` the new keys."""
    sql, fields = _insert_for_each(type(obj), source)
    return sql, _values(obj, fields)


@functools.cache
def _insert_for_each(model: type[Model], source: str) -> tuple[str, tuple[Field, ...]]:
    _, fields = _insert(model)
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} ({_columns(fields)}) "
        f"SELECT {', '.join(['%s'] * len(fields))} FROM {source} "
        f"RETURNING {quote(model._meta.pk.column)}"
    )
    return sql, fields


class AnyOf(Lookup):
    """``field__any=[...]``: ``field = ANY(%s)`` with the list as one parameter, so a
    query's SQL is the same however many values it is given (``in`` writes one
    placeholder per value)."""

    lookup_name = "any"
    prepare_rhs = False

    def get_db_prep_lookup(self, value, connection):
        return "%s", [[self.lhs.output_field.get_db_prep_value(v, connection) for v in value]]

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} = ANY({rhs})", [*lhs_params, *rhs_params]


IntegerField.register_lookup(AnyOf)

# Values no real query carries: where each lands among the compiled parameters marks
# the slot a later call fills.
_SENTINEL = -7_777_777_000


# Measured (bench/bench_rows.py): a harness outcome's locked in-play read of four
# lessons with their promotion-twin annotation, 240 us against 2,679 us (11x) for
# evaluating the same queryset.
class PreparedQuery:
    """A queryset compiled to SQL once, then run with new values.

    ``build(**values)`` returns the queryset. It is called once, on first use (in
    the caller's transaction, as ``select_for_update`` requires), with a distinct
    sentinel for each value: an ``int`` for a name in ``ints``, a one-item list for
    a name in ``lists`` (use the ``__any`` lookup for those). Each sentinel must land
    exactly once among the parameters. Later calls bind their values in those places
    and run the SQL; each row becomes an instance as ``Model.objects.raw`` would make
    it (the fields' converters applied, annotations as attributes), by a plan worked
    out from the first call's columns.

    On a hot path this saves the ORM's building and compiling of the same query on
    every call (about 1 ms for a locked read with an ``Exists`` annotation).
    """

    def __init__(self, build, *, ints: tuple[str, ...] = (), lists: tuple[str, ...] = ()):
        self.build = build
        self.ints, self.lists = ints, lists
        self._compiled: tuple[type[Model], str, list, dict[str, int]] | None = None
        self._reader: _Reader | None = None

    def _compile(self) -> tuple[type[Model], str, list, dict[str, int]]:
        sentinels: dict[str, object] = {}
        for offset, name in enumerate(self.ints + self.lists):
            value = _SENTINEL - offset
            sentinels[name] = [value] if name in self.lists else value
        queryset = self.build(**sentinels)
        sql, params = queryset.query.get_compiler(connection=connection).as_sql()
        params = list(params)
        slots = {}
        for name, sentinel in sentinels.items():
            places = [i for i, p in enumerate(params) if p == sentinel]
            if len(places) != 1:
                raise TypeError(f"{name!r} lands {len(places)} times in the compiled query")
            slots[name] = places[0]
        return queryset.model, sql, params, slots

    def rows(self, **values) -> list[Model]:
        if self._compiled is None:
            self._compiled = self._compile()
        model, sql, params, slots = self._compiled
        bound = list(params)
        for name, place in slots.items():
            bound[place] = list(values[name]) if name in self.lists else values[name]
        with connection.cursor() as cursor:
            cursor.execute(sql, bound)
            if self._reader is None:
                self._reader = _Reader(model, [column.name for column in cursor.description])
            return [self._reader.instance(row) for row in cursor.fetchall()]


class _Reader:
    """How one statement's rows become model instances, worked out once: what
    ``Model.objects.raw`` works out again on every call (which columns are fields,
    in what order, with which converters; the other columns are annotations, set
    as attributes unconverted, as ``raw`` sets them)."""

    def __init__(self, model: type[Model], columns: list[str]):
        by_column = {f.column: f for f in model._meta.concrete_fields}
        fields = [(i, by_column[c]) for i, c in enumerate(columns) if c in by_column]
        if model._meta.pk not in [f for _, f in fields]:
            raise TypeError("a prepared query must read the primary key")
        self.model = model
        self.names = [f.attname for _, f in fields]
        self.fields = []
        for i, f in fields:
            col = f.get_col(model._meta.db_table)
            convert = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
            self.fields.append((i, col, convert))
        self.annotations = [(c, i) for i, c in enumerate(columns) if c not in by_column]

    def instance(self, row) -> Model:
        values = []
        for i, col, convert in self.fields:
            value = row[i]
            for converter in convert:
                value = converter(value, col, connection)
            values.append(value)
        obj = self.model.from_db(connection.alias, self.names, values)
        for name, i in self.annotations:
            setattr(obj, name, row[i])
        return obj
