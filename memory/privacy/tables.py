"""The shapes the derived-data map is declared in: a table's role (content,
derived, kept), its derivations, and references by id that live outside foreign keys."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from django.apps import apps
from django.db import models
from django.db.models import Q, QuerySet

from memory.models import Workspace
from memory.privacy.queries import SelectFn

CONTENT = "content"
DERIVED = "derived"
KEPT = "kept"


class PlanRows(Protocol):
    """What a derivation reads from a plan (``datamap.Plan``): declared here, below
    the map, so the derivations and the shapes need not import the map that names them."""

    workspace: Workspace

    def scoped(self, label: str) -> QuerySet: ...

    def direct(self, label: str) -> QuerySet: ...

    def going(self, label: str) -> Q: ...

    def erased_evidence_ids(self) -> QuerySet: ...


@dataclass(frozen=True)
class ById:
    """A polymorphic id: ``type_field`` says which table ``targets[type]`` it points into."""

    type_field: str
    targets: Mapping[str, str]


@dataclass(frozen=True)
class Prefixed:
    """An id inside a string, ``<prefix><id>`` (the ledger's ``outcome:42``)."""

    prefix: str
    target: str


@dataclass(frozen=True)
class Derivation:
    """Rows of this table computed from rows of ``sources``.

    ``delete``: ``rows(plan)`` are erased; it is evaluated while the sources still
    exist (the job runs every derivation before it deletes anything directly).
    ``rebuild``: ``owners(plan)`` lists ``(label, id)`` of rows that stay but were
    computed partly from erased rows; the service ``rebuild_with`` removes the
    erased part and recomputes them from what is left. After a rebuild the owner
    no longer cites erased rows, so ``owners`` shrinks to nothing.
    """

    name: str
    sources: tuple[str, ...]
    how: str
    rows: Callable[[PlanRows], QuerySet] | None = None
    action: str = "delete"
    owners: Callable[[PlanRows, int], list[tuple[str, int]]] | None = None
    rebuild_with: Callable[..., dict[str, int]] | None = None

    def rebuild(self, *, plan: PlanRows, label: str, pk: int) -> dict[str, int]:
        return self.rebuild_with(
            workspace=plan.workspace,
            label=label,
            pk=pk,
            erased_evidence_ids=plan.erased_evidence_ids(),
            erased_outcomes=plan.direct("memory.Outcome"),
            erased_posted=plan.direct("memory.Evidence"),
        )


@dataclass(frozen=True)
class Table:
    label: str
    role: str
    why: str
    workspace_path: str | None = "workspace"
    selectors: Mapping[str, SelectFn] = field(default_factory=dict)
    derived: tuple[Derivation, ...] = ()
    cascades_from: tuple[str, ...] = ()
    # source label → (ids → Q on this table): rows referencing deleted source ids.
    follows: Mapping[str, Callable[[list[int]], Q]] = field(default_factory=dict)
    lineage: str | None = None
    # Section in the export document (None: never exported) and fields left out.
    export: str | None = None
    export_exclude: tuple[str, ...] = ()
    # References by id without a foreign key, so export and import can remap them:
    # field → "memory.X" (an id or a list of ids), ById(type_field, {type: label})
    # (polymorphic), Prefixed("outcome:", "memory.Outcome") (an id inside a string)
    # or a tuple of InJson (ids inside a JSON value; memory.privacy.references).
    refs: Mapping[str, object] = field(default_factory=dict)
    # Trust fields (who reported, protected, approved; state, confidence, expiry) with
    # how an unsigned import sets each (memory.privacy.trust_fields); every trust-like
    # field of an exported table is declared (tests/memory/privacy/test_trust_fields.py).
    trust: Mapping[str, Callable[[object], object]] = field(default_factory=dict)
    # Columns whose values are content an API response echoes back: a stored
    # idempotency replay quoting one of them goes when the row goes.
    quoted: tuple[str, ...] = ()
    # Kept by database triggers from the rows of another table (the full-text counts
    # from knowledge): never deleted from directly, since its rows count many sources.
    # The triggers take an erased row's share out; the job then folds the counts, so
    # a word only erased rows held is gone, and rewrites the table's files.
    by_trigger: bool = False

    @property
    def model(self) -> type[models.Model]:
        return apps.get_model(self.label)

    @property
    def erasable(self) -> bool:
        return self.role in (CONTENT, DERIVED) and not self.by_trigger
