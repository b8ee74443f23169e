"""How a selector matches rows of one table: a text match over every text column,
one column equal to the value, the agent, or a session named inside JSON.

The rows computed from matched ones are found in ``memory.privacy.derivations``."""

from __future__ import annotations

import json
from collections.abc import Callable

from django.db import models
from django.db.models import F, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from memory.privacy.selection import Selector

SelectFn = Callable[[QuerySet, Selector], QuerySet]


def text_columns(model: type[models.Model]) -> list[models.Field]:
    """Every column a text match searches: text, JSON and bytes (not generated ones)."""
    out = []
    for f in model._meta.concrete_fields:
        if isinstance(f, models.GeneratedField) or f.primary_key:
            continue
        if isinstance(f, models.CharField | models.TextField | models.JSONField):
            out.append(f)
        elif isinstance(f, models.BinaryField):
            out.append(f)
    return out


class _ConvertFrom(models.Func):
    # Stored responses are always UTF-8 JSON written by our own middleware.
    function = "convert_from"
    template = "%(function)s(%(expressions)s, 'UTF8')"
    output_field = models.TextField()


def text_match(qs: QuerySet, sel: Selector) -> QuerySet:
    """Case-insensitive substring over every text, JSON and byte column of the table.

    JSON is searched as its text, so a value with quotes or backslashes is also
    matched in its escaped form.
    """
    needle = sel.value
    escaped = json.dumps(needle, ensure_ascii=False)[1:-1]
    q = Q()
    annotations = {}
    for f in text_columns(qs.model):
        if isinstance(f, models.JSONField):
            alias = f"_erasure_text_{f.name}"
            annotations[alias] = Cast(f.name, models.TextField())
            q |= Q(**{f"{alias}__icontains": needle})
            if escaped != needle:
                q |= Q(**{f"{alias}__icontains": escaped})
        elif isinstance(f, models.BinaryField):
            alias = f"_erasure_text_{f.name}"
            annotations[alias] = _ConvertFrom(f.name)
            q |= Q(**{f"{alias}__icontains": needle})
            if escaped != needle:
                q |= Q(**{f"{alias}__icontains": escaped})
        else:
            q |= Q(**{f"{f.name}__icontains": needle})
    if not q:
        return qs.none()
    return qs.alias(**annotations).filter(q)


def by(field_name: str) -> SelectFn:
    """A selector that matches one column against the selector's value."""
    return lambda qs, sel: qs.filter(**{field_name: sel.value})


def by_agent(field_name: str = "agent") -> SelectFn:
    """A selector that matches the rows the selector's agent wrote."""
    return lambda qs, sel: qs.filter(**{field_name: sel.agent})


class _JsonPathExists(models.Func):
    function = "jsonb_path_exists"
    output_field = models.BooleanField()


def session_ref(column: str, key: str) -> SelectFn:
    """Rows whose JSON ``column->key`` list names the session or one of its turns.

    Turn ids are written ``<session>#<n>`` (or ``/``, ``:``): a turn id that
    starts with the session id and a separator belongs to it.
    """
    path = f"$.{key}[*] ? (@ == $v || @ starts with $a || @ starts with $b || @ starts with $c)"

    def select(qs: QuerySet, sel: Selector) -> QuerySet:
        v = sel.value
        variables = json.dumps({"v": v, "a": v + "#", "b": v + "/", "c": v + ":"})
        return qs.filter(
            _JsonPathExists(
                F(column), RawSQL("%s::jsonpath", [path]), RawSQL("%s::jsonb", [variables])
            )
        )

    return select
