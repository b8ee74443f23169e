"""Every reference the derived-data map declares resolves inside its workspace.

Foreign keys, ids in columns without one (``refs``: the ledger's target, a
feedback sample's delta ids, ``outcome:42``) and ids inside JSON values
(``InJson``) are walked for every exported table. Import runs this before it
commits, so an import never leaves an id naming another workspace's row or
nothing; tests run it after a round trip.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from memory.models import Workspace
from memory.privacy.datamap import TABLES
from memory.privacy.references import json_ids, json_specs
from memory.privacy.tables import ById, Prefixed, Table


@dataclass(frozen=True)
class Dangling:
    table: str
    pk: int
    field: str
    target: str | None  # None: a type the map does not know
    value: object


def _scoped(table: Table, workspace: Workspace):
    qs = table.model._default_manager.all()
    if table.workspace_path:
        qs = qs.filter(**{table.workspace_path: workspace.pk})
    return qs


def _declared(spec, value, row: dict) -> Iterator[tuple[str | None, object]]:
    """``(label, id)`` of every reference one ``refs`` entry makes in one row."""
    if value is None:
        return
    if json_specs(spec):
        yield from json_ids(spec, value)
    elif isinstance(spec, str):
        yield from ((spec, v) for v in (value if isinstance(value, list) else [value]))
    elif isinstance(spec, ById):
        yield spec.targets.get(row.get(spec.type_field)), value
    elif isinstance(spec, Prefixed):
        if isinstance(value, str) and value.startswith(spec.prefix):
            rest = value[len(spec.prefix) :]
            yield spec.target, int(rest) if rest.isdigit() else rest


def references_dangling(*, workspace: Workspace) -> list[Dangling]:
    """References of ``workspace``'s exported tables whose target is not a row of
    the same workspace (empty when every one resolves)."""
    exported = {label: t for label, t in TABLES.items() if t.export}
    present: dict[str, set[int]] = {}

    def exists(label: str | None, pk) -> bool:
        if label not in exported:
            return False
        if label not in present:
            present[label] = set(_scoped(exported[label], workspace).values_list("pk", flat=True))
        return pk in present[label]

    found: list[Dangling] = []
    for label, table in exported.items():
        model = table.model
        fks = [
            f
            for f in model._meta.concrete_fields
            if f.is_relation and f.name != "workspace" and f.related_model._meta.label in exported
        ]
        extra = {s.type_field for s in table.refs.values() if isinstance(s, ById)}
        columns = {f.attname for f in fks} | set(table.refs) | extra
        for row in _scoped(table, workspace).values("pk", *sorted(columns)).iterator():
            for f in fks:
                value = row[f.attname]
                if value is not None and not exists(f.related_model._meta.label, value):
                    found.append(
                        Dangling(label, row["pk"], f.name, f.related_model._meta.label, value)
                    )
            for name, spec in table.refs.items():
                for target, value in _declared(spec, row[name], row):
                    if not exists(target, value):
                        found.append(Dangling(label, row["pk"], name, target, value))
        for f in model._meta.many_to_many:
            target = f.related_model._meta.label
            if target not in exported:
                continue
            through = f.remote_field.through
            src, dst = f.m2m_field_name() + "_id", f.m2m_reverse_field_name() + "_id"
            mine = _scoped(table, workspace).values("pk")
            for a, b in through.objects.filter(**{f"{src}__in": mine}).values_list(src, dst):
                if not exists(target, b):
                    found.append(Dangling(label, a, f.name, target, b))
    return found
