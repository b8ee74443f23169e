"""A validated new knowledge item on its way to the table.

Validation makes one, dedup compares it with what is stored, the services and the
batch path embed and store it; it lives below all of them so none imports another
just for the type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class Prepared:
    """A validated new item, ready to embed and store."""

    content: str
    category: str
    domain: str
    entity: str
    context: str
    sensitive: bool
    source: str
    confidence: float
    metadata: dict
    due_at: datetime | None
    operation_key: str
    pinned: bool
    sealed: bool
    embedding: list[float] | None
    embedding_model: str
    words: frozenset[str] = field(default_factory=frozenset)
    observed_at: datetime | None = None
