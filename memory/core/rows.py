"""Inserting one model row through a statement written once per model.

``Model.objects.create`` builds and compiles the same INSERT on every call; on a
hot path (an outcome per agent turn) that compiling cost more than the write.
``row_insert`` writes each field's value exactly as the ORM would (``pre_save``,
so ``auto_now_add`` works; ``get_db_prep_save``, so JSON and times are adapted)
into a statement made once per model. No ``pre_save``/``post_save`` signals are
sent: use it only for models nothing listens to.
"""

from __future__ import annotations

import functools

from django.db import connection
from django.db.models import NOT_PROVIDED, Field, Model


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
        f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))}) RETURNING {quote(pk.column)}"
    )
    return sql, fields


def row_insert(obj: Model) -> Model:
    """Insert ``obj`` (unsaved, its primary key left to the database); returns it saved."""
    sql, fields = _insert(type(obj))
    values = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        obj.pk = cursor.fetchone()[0]
    obj._state.adding = False
    obj._state.db = connection.alias
    return obj
