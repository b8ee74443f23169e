"""Who put an item's words there, and whether they are earned (SPEC section 4a).

Derived from what was stored (channel, source, seal, evidence, a person's approval and
the quoted mark set when the words were written), never from the words themselves:

- ``person``: a person wrote or sealed it (UI, import by a person, ``source=user``);
- ``harness``: the harness observed it (a harness-channel write, a mechanical lesson);
- ``agent``: the model's own words;
- ``quoted``: text copied from a tool's output or a pasted turn: an automatic error item
  (it quotes the failing output), or an agent write that repeats a stored tool output or
  conversation turn. Quoted text is never shown as observed by the system.

``earned``: a person's words, the harness's observations, an active lesson (it needed a
harness-confirmed outcome to leave ``claimed``), an item a person approved for the
project ("always for this project" at the action gate), or knowledge whose strength
weighted evidence raised above its birth. An agent's or quoted item is unearned until
one of those happens. This module imports no domain and no Django model: callers pass
the stored fields.
"""

from __future__ import annotations

from dataclasses import dataclass

PERSON = "person"
HARNESS = "harness"
AGENT = "agent"
QUOTED = "quoted"
ORIGINS = (PERSON, HARNESS, AGENT, QUOTED)

# metadata keys written by the services that know (knowledge_remember, the gate's answers)
QUOTED_KEY = "quoted_from"
APPROVED_KEY = "approved_for_projects"

# The birth strength of an agent's knowledge item (memory.knowledge.validation); above it
# only weighted (harness or person) evidence moves it.
BIRTH_CONFIDENCE = 0.5


@dataclass(frozen=True)
class Provenance:
    origin: str
    earned: bool

    def as_json(self) -> dict:
        return {"origin": self.origin, "earned": self.earned}

    @property
    def label(self) -> str:
        """How the memory block names it to a model."""
        if self.origin == QUOTED:
            return "quoted from a tool's output or a pasted turn, not verified"
        if self.earned:
            return {PERSON: "from a person", HARNESS: "observed by the harness"}.get(
                self.origin, "confirmed by outcomes"
            )
        return "the agent's own note, not verified"


def knowledge_provenance(
    *,
    channel: str,
    source: str,
    sealed: bool,
    metadata: dict | None,
    confidence: float,
    project_digest: str = "",
) -> Provenance:
    metadata = metadata or {}
    approved = bool(project_digest) and project_digest in (metadata.get(APPROVED_KEY) or [])
    if sealed or channel == PERSON or source == "user":
        return Provenance(PERSON, True)
    if source == "error_auto" or metadata.get(QUOTED_KEY):
        return Provenance(QUOTED, approved)
    if channel in (HARNESS, "system"):
        return Provenance(HARNESS, True)
    return Provenance(AGENT, approved or confidence > BIRTH_CONFIDENCE + 1e-9)


def lesson_provenance(*, channel: str, source: str, state: str, sealed: bool) -> Provenance:
    if sealed or channel == PERSON or source == "user":
        return Provenance(PERSON, True)
    origin = HARNESS if (channel == HARNESS or source == "loop") else AGENT
    return Provenance(origin, state == "active")


def knowledge_item_provenance(item, *, project_digest: str = "") -> Provenance:
    """:func:`knowledge_provenance` of a Knowledge row (or any object with its fields)."""
    return knowledge_provenance(
        channel=item.channel,
        source=item.source,
        sealed=bool(getattr(item, "sealed", False)),
        metadata=getattr(item, "metadata", None),
        confidence=float(item.confidence),
        project_digest=project_digest,
    )


def lesson_item_provenance(lesson) -> Provenance:
    return lesson_provenance(
        channel=lesson.channel, source=lesson.source, state=lesson.state, sealed=lesson.sealed
    )
