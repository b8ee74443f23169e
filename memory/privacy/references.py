"""Ids that live inside JSON values, declared in the derived-data map.

A foreign key is followed by the database; an id written into a JSON column
(an outcome's ``in_play``, the body a write answered with, an umbrella delta's
``provenance.members``) is not. The map declares each of them with an
:class:`InJson`, so export states them in its header, import rewrites them
through the same id map as foreign keys, and a check can walk them.

A path walks from the column's value: a key steps into an object, ``"*"`` into
every element of a list; the last step names the id itself (a key of an object,
or ``"*"`` for a list of ids). Examples::

    InJson(("*", "id"), {"lesson": "memory.Lesson"}, by="type")  # [{"type", "id"}]
    InJson(("members", "*"), "memory.SkillDelta")                 # {"members": [1, 2]}
    InJson(("id",), "memory.Outcome")                             # {"id": 42}

An id that cannot be resolved (its row was not exported, or its type is not one
the map knows) is **dropped**, never kept: a list element goes (the whole
``{"type", "id"}`` object in a list of objects), an object's key is set to null.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

# resolve(label or None, old id) → new id, or None when it does not resolve.
Resolve = Callable[[str | None, int], int | None]

_DROP = object()


@dataclass(frozen=True)
class InJson:
    """One kind of id inside a JSON column (see the module docstring)."""

    path: tuple[str, ...]
    target: str | Mapping[str, str]
    by: str | None = None  # the sibling key naming the type, for a polymorphic target

    def __post_init__(self):
        if not self.path:
            raise ValueError("an InJson path needs at least one step")
        if (self.by is None) != isinstance(self.target, str):
            raise ValueError("a mapping target needs `by`, a single label must not have it")
        if self.by is not None and self.path[-1] == "*":
            raise ValueError("a list of bare ids has no sibling key to name their type")

    def labels(self) -> set[str]:
        return {self.target} if isinstance(self.target, str) else set(self.target.values())

    def label_in(self, container) -> str | None:
        if isinstance(self.target, str):
            return self.target
        kind = container.get(self.by) if isinstance(container, dict) else None
        return self.target.get(kind) if isinstance(kind, str) else None

    def as_json(self, names: Mapping[str, str]) -> dict:
        """The declaration as an export header states it (sections, not labels)."""
        if isinstance(self.target, str):
            return {"path": list(self.path), "section": names[self.target]}
        return {
            "path": list(self.path),
            "by": self.by,
            "sections": {k: names[v] for k, v in self.target.items()},
        }


@dataclass
class Tally:
    remapped: int = 0
    dropped: int = 0
    found: list[tuple[str | None, int]] = field(default_factory=list)


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _resolve(value, label: str | None, resolve: Resolve, tally: Tally):
    if value is None:
        return None
    tally.found.append((label, value))
    if not _is_id(value):
        tally.dropped += 1
        return _DROP
    new = resolve(label, value) if label is not None else None
    if new is None:
        tally.dropped += 1
        return _DROP
    tally.remapped += 1
    return new


def _walk(node, path: tuple[str, ...], spec: InJson, resolve: Resolve, tally: Tally, in_list):
    step, rest = path[0], path[1:]
    if step == "~":  # every value of an object keyed by name (e.g. blockers by subject)
        if not isinstance(node, dict) or not rest:
            return node
        return {
            key: _walk(value, rest, spec, resolve, tally, in_list=False)
            for key, value in node.items()
        }
    if step == "*":
        if not isinstance(node, list):
            return node
        out = []
        for element in node:
            if rest:
                new = _walk(element, rest, spec, resolve, tally, in_list=True)
            else:
                new = _resolve(element, spec.label_in(None), resolve, tally)
            if new is not _DROP:
                out.append(new)
        return out
    if not isinstance(node, dict) or step not in node:
        return node
    if rest:
        return {**node, step: _walk(node[step], rest, spec, resolve, tally, in_list=False)}
    new = _resolve(node[step], spec.label_in(node), resolve, tally)
    if new is _DROP:
        return _DROP if in_list else {**node, step: None}
    return {**node, step: new}


def json_specs(spec) -> tuple[InJson, ...]:
    """The InJson declarations of a map ``refs`` entry (empty for a column reference)."""
    if isinstance(spec, tuple) and spec and all(isinstance(s, InJson) for s in spec):
        return spec
    return ()


def json_remap(specs: tuple[InJson, ...], value, resolve: Resolve) -> tuple[object, Tally]:
    """``value`` with every declared id rewritten by ``resolve`` (unresolved ones dropped)."""
    tally = Tally()
    for spec in specs:
        new = _walk(value, spec.path, spec, resolve, tally, in_list=False)
        value = None if new is _DROP else new
    return value, tally


def json_ids(specs: tuple[InJson, ...], value) -> Iterator[tuple[str | None, int]]:
    """Every declared id in ``value`` as ``(label, id)``; label None for an unknown type."""
    _, tally = json_remap(specs, value, lambda label, pk: pk)
    yield from tally.found
