"""Provenance in every API body that serves an item's words (SPEC section 4a): one
schema and one field, so a new serializer of served items gets it the same way (the
generated test in tests/agents/test_provenance_api.py finds any that does not)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memory.core.provenance import (
    ORIGINS,
    knowledge_item_provenance,
    lesson_item_provenance,
)


class ProvenanceOut(serializers.Serializer):
    origin = serializers.ChoiceField(
        choices=list(ORIGINS),
        help_text="Who put the words there: `person`, `harness` (observed by the harness), "
        "`agent` (the model's own words) or `quoted` (copied from a tool's output or a "
        "pasted turn).",
    )
    earned = serializers.BooleanField(
        help_text="A person's words, the harness's observation, confirmed by evidence or "
        "approved by a person; unearned text never steers an action without asking."
    )


@extend_schema_field(ProvenanceOut)
class ProvenanceField(serializers.Field):
    """The item's provenance: precomputed (a recall hit), else from the stored row."""

    def __init__(self, *, kind: str = "knowledge", **kwargs):
        self.kind = kind
        kwargs.setdefault("source", "*")
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value):
        given = value.get("provenance") if isinstance(value, dict) else None
        if given is None and not isinstance(value, dict):
            given = getattr(value, "provenance", None)
        if isinstance(given, dict):
            return given
        if self.kind == "lesson":
            return lesson_item_provenance(value).as_json()
        return knowledge_item_provenance(value).as_json()
