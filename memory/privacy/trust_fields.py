"""How an unsigned import sets a trust field: the rules the data map's ``Table.trust``
declares, one per field (``memory/privacy/datamap.py``).

A file nobody trusted signed is the agent's word: nothing in it may say a harness or
a person reported, confirmed, protected or approved a row. Each exported table names
its trust fields (channel, pinned, sealed, state, confidence, expiry, approval ...)
with the rule that applies; ``imports.as_claimed`` applies them and knows no table.
``tests/memory/privacy/test_trust_fields.py`` fails when an exported model has a
trust-like field its table does not declare.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

Rule = Callable[[object], object]


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
