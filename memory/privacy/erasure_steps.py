"""What an erasure deletes and in which order (``erasure_steps``), with the helpers that
follow a row's lineage and find the quoted copies of its text in stored answers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.db import models
from django.db.models import QuerySet

from memory.models import IdempotencyRecord, Workspace
from memory.privacy.datamap import Plan, erasable_tables
from memory.privacy.tables import Derivation, Table

# A quoted string this long or longer in a stored response is taken as a quote of
# the erased row (shorter ones, like "global", would match unrelated responses).
QUOTE_MIN_CHARS = 8


# --------------------------------------------------------------------------- steps


@dataclass(frozen=True)
class Step:
    """One pass of the job: rows of ``table`` to delete (or to rebuild their owner)."""

    table: Table
    name: str
    rows: Callable[[], QuerySet]
    derivation: Derivation | None = None


def erasure_steps(plan: Plan) -> list[Step]:
    """Derivations first (they read their sources, which the direct steps delete),
    then every erasable table's direct matches, in map order."""
    steps: list[Step] = []
    for table, derivation in plan.derivations():
        if derivation.action == "rebuild":
            steps.append(Step(table, derivation.name, lambda: None, derivation))
        else:
            steps.append(
                Step(table, derivation.name, (lambda d=derivation: d.rows(plan)), derivation)
            )
    for table in erasable_tables():
        if plan.selector.kind == "text" or plan.selector.kind in table.selectors:
            steps.append(Step(table, "direct", (lambda t=table: plan.direct(t.label))))
    return steps


def in_workspace(model: type[models.Model], workspace: Workspace) -> QuerySet:
    """``model``'s rows in ``workspace``; every row of a table without the key (a child
    reached through its parent's)."""
    rows = model._default_manager.all()
    if any(field.column == "workspace_id" for field in model._meta.concrete_fields):
        rows = rows.filter(workspace=workspace)
    return rows


def lineage_ids(
    model: type[models.Model], field_name: str | None, ids: set[int], *, workspace: Workspace
) -> set[int]:
    """``ids`` and every earlier version that a chain of ``field_name`` leads to them."""
    if not field_name:
        return ids
    out = set(ids)
    frontier = set(ids)
    while frontier:
        older = set(
            in_workspace(model, workspace)
            .filter(**{f"{field_name}__in": frontier})
            .exclude(pk__in=out)
            .values_list("pk", flat=True)
        )
        out |= older
        frontier = older
    return out


def _strings(value) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from _strings(inner)
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from _strings(inner)


def quoted_copies(table: Table, ids: Iterable[int], *, workspace: Workspace) -> set[str]:
    """The table's ``quoted`` values of these rows, as the JSON strings a stored API
    response would hold them in (the same escaping DRF uses, and the ASCII one)."""
    if not table.quoted:
        return set()
    quotes: set[str] = set()
    rows = in_workspace(table.model, workspace).filter(pk__in=ids).values_list(*table.quoted)
    for row in rows:
        for value in row:
            for text in _strings(value):
                if len(text) >= QUOTE_MIN_CHARS:
                    quotes.add(json.dumps(text, ensure_ascii=False))
                    quotes.add(json.dumps(text))
    return quotes


def idempotency_quoting(workspace: Workspace, quotes: set[str]) -> QuerySet:
    from django.db.models.expressions import RawSQL

    if not quotes:
        return IdempotencyRecord.objects.none()
    quoting = RawSQL(
        "EXISTS (SELECT 1 FROM unnest(%s::text[]) AS q(s) "
        'WHERE strpos(convert_from("memory_idempotencyrecord"."response_body", \'UTF8\'), q.s) > 0)',
        [sorted(quotes)],
        output_field=models.BooleanField(),
    )
    return IdempotencyRecord.objects.filter(quoting, workspace=workspace)
