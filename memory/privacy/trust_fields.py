"""How an unsigned import sets a trust field: the rules the data map's ``Table.trust``
declares, one per field (``memory/privacy/datamap.py``).

A file nobody trusted signed is the agent's word: nothing in it may say a harness or
a person reported, confirmed, protected or approved a row. Each exported table names
its trust fields (channel, pinned, sealed, state, confidence, expiry, approval ...)
with the rule that applies; ``as_claimed`` (below) applies them and knows no table.
``tests/memory/privacy/test_trust_fields.py`` fails when an exported model has a
trust-like field its table does not declare.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.utils import timezone

from memory.models import (
    Category,
    Channel,
    DeltaStatus,
    DeltaTrust,
    LessonSource,
    LessonState,
    SituationLessonState,
    Source,
)

Rule = Callable[[object], object]

if TYPE_CHECKING:
    from memory.privacy.tables import Table


@dataclass(frozen=True)
class Kept:
    """A trust field an unsigned import keeps as written, and why that is safe."""

    why: str

    def __call__(self, value):
        return value


def to(value) -> Rule:
    """Always ``value``."""
    return lambda _old: value


def mapped(mapping: Mapping) -> Rule:
    """``mapping[old]`` where the old value is a key, else the old value."""
    return lambda old: mapping.get(old, old)


def capped(limit: float | str) -> Rule:
    """At most ``limit`` (a number, or the name of a setting read at import time)."""

    def rule(old):
        if not isinstance(old, int | float) or isinstance(old, bool):
            return old
        bound = getattr(settings, limit) if isinstance(limit, str) else limit
        return min(old, bound)

    return rule


def now() -> Rule:
    """The moment of the import (an expiry that has already come)."""
    return lambda _old: timezone.now()


def as_claimed(table: Table, row: dict) -> None:
    """One row of an unsigned (or untrusted) export as the agent's word, pending
    review: a file anyone can edit is no harness, person or approval.

    Generic: every trust field the data map declares for the table
    (``Table.trust``, rules in ``memory.privacy.trust_fields``) is set by its rule;
    every channel becomes ``agent``, lessons arrive claimed without pin or seal,
    knowledge without protections, deltas quarantined, situation lessons ended.
    """
    fields = {f.name: f.attname for f in table.model._meta.concrete_fields}
    for name, rule in table.trust.items():
        attname = fields[name]
        if attname in row:
            row[attname] = rule(row[attname])


def unique_after_demotion(table: Table, row: dict, seen: dict) -> None:
    """Keep a demoted row from colliding with its sibling: an agent and a harness report
    of one ``outcome_id`` are two rows (unique per channel) until both become the
    agent's word. The second keeps its row, with the channel it claimed appended to the
    first text field of the constraint (``run-7~harness``)."""
    model = table.model
    for constraint in model._meta.constraints:
        if not isinstance(constraint, models.UniqueConstraint) or constraint.condition:
            continue
        names = list(constraint.fields)
        if not names or not set(names) & set(table.trust):
            continue
        attnames = [model._meta.get_field(n).attname for n in names]
        key = tuple(row.get(a) for a in attnames)
        taken = seen.setdefault(constraint.name, set())
        if key in taken:
            text = next(
                (
                    model._meta.get_field(n)
                    for n in names
                    if n not in table.trust
                    and isinstance(model._meta.get_field(n), models.CharField)
                ),
                None,
            )
            if text is not None:
                suffix = f"~{row.get('_claimed_channel') or 'copy'}"
                base = str(row.get(text.attname) or "")
                row[text.attname] = base[: text.max_length - len(suffix)] + suffix
                key = tuple(row.get(a) for a in attnames)
        taken.add(key)


# The rules of the larger tables, named by the data map's Table.trust (datamap.py).

LESSONS_TRUST = {
    "channel": to(Channel.AGENT),
    "state": mapped({LessonState.ACTIVE: LessonState.CLAIMED}),
    "source": mapped({LessonSource.USER: LessonSource.MODEL}),
    "confidence": capped("CAIRN_LESSON_CLAIMED_CONFIDENCE"),
    "birth_confidence": capped("CAIRN_LESSON_CLAIMED_CONFIDENCE"),
    "pinned": to(False),
    "sealed": to(False),
}

KNOWLEDGE_TRUST = {
    "channel": to(Channel.AGENT),
    "source": mapped({Source.USER: Source.IMPORT}),
    "category": mapped({Category.SYSTEM: Category.NOTE}),
    "confidence": capped(0.5),
    "pinned": to(False),
    "sealed": to(False),
    "status": Kept("archived or active is the item's life, not its trust"),
}

SITUATION_LESSONS_TRUST = {
    # Written only by the server from a harness-declared blocker: from a
    # file, history to read, never a blocker /context/ serves.
    "state": mapped({SituationLessonState.ACTIVE: SituationLessonState.SUPERSEDED}),
    "expires_at": now(),
    "ended_at": now(),
    "confidence": capped("CAIRN_LESSON_CLAIMED_CONFIDENCE"),
}

LEARNED_FACTS_TRUST = {
    "channel": to(Channel.AGENT),
    "provenance_source": Kept("never imported from an unsigned file (UNSIGNED_NEVER)"),
    "provenance": Kept("never imported from an unsigned file (UNSIGNED_NEVER)"),
}

SKILL_DELTAS_TRUST = {
    "channel": to(Channel.AGENT),
    "status": mapped(
        {
            DeltaStatus.ACTIVE: DeltaStatus.QUARANTINED,
            DeltaStatus.STAGED: DeltaStatus.QUARANTINED,
        }
    ),
    "trust": to(DeltaTrust.UNTRUSTED),
    "approved_by": to(""),
    "approved_at": to(None),
    "approval_samples": to(None),
    "approval_positive": to(None),
    "provenance_source": Kept("quarantined and untrusted whatever it says"),
    "provenance": Kept("quarantined and untrusted whatever it says"),
}

OUTCOMES_TRUST = {
    "channel": to(Channel.AGENT),
    "passed": Kept("an agent-channel outcome never counts as evidence"),
    "reported_passed": Kept("the client's claim, shown for review only"),
}

SITUATION_EVENTS_TRUST = {
    "channel": to(Channel.AGENT),
    "source": Kept("what the event says happened; its channel says who said it"),
}
