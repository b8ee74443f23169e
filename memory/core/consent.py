"""Consent: the one value that lets a learned change take effect (SPEC section 6).

A delta becomes active, and a tier-0 fact applies, only with a :class:`Consent`,
and only two functions make one:

- :func:`consent_by_role` — a signed-in reviewer or admin of the workspace
  decided (the role check is inside it, so holding a Consent proves it ran);
- :func:`consent_by_turn` — the claim is one whole sentence of one cited user
  turn that *this agent's harness* posted: a statement, not a question, not in
  quotation marks, and equal after folding, so a negated or extended sentence
  backs nothing (``memory.core.said``).

Building one by hand raises. What a turn says more loosely (every word of the
claim is in one turn, but no sentence equals it) is returned as a
:class:`TurnMatch` with no consent: the delta is staged as untrusted and a person
sees the turn beside it, the matching words highlighted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from django.db.models import Q

from memory.core.actors import Actor, actor_require_role
from memory.core.said import claim_match
from memory.core.text import fold_text
from memory.models import Agent, Channel, ConversationTurn, TurnRole, Workspace

_MINT = object()
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Consent:
    """Proof that a person consented: by their role, or by their own sentence."""

    basis: str  # "role" | "said"
    by: str  # for the audit log: "user:ada", or "harness:gaia said sess#3"
    mint: object = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.mint is not _MINT:
            raise TypeError("Consent comes from consent_by_role or consent_by_turn, never by hand.")


def consent_by_role(*, actor: Actor, workspace: Workspace, action: str) -> Consent:
    """A reviewer's or admin's decision in ``workspace`` (403 for anyone else)."""
    actor_require_role(actor, workspace=workspace, action=action)
    return Consent(basis="role", by=actor.label, mint=_MINT)


class Claim(NamedTuple):
    """What a change would make true, as a person would have to say it.

    ``sentences``: any one of them said verbatim is consent (empty: this kind of
    change is never consented to by a sentence, only by a reviewer).
    ``pieces``: words that, all found in one turn, make it a looser match (staged
    as untrusted, shown to a reviewer).
    """

    sentences: tuple[str, ...]
    pieces: tuple[str, ...]


class TurnMatch(NamedTuple):
    """How the cited turns stand against a claim."""

    found: bool  # at least one cited ref is a user turn this agent's harness posted
    consent: Consent | None  # a sentence of one turn equals the claim
    loose: bool  # every piece of the claim is in one turn, but no sentence equals it
    turn: str  # the ref that matched best ("" when none did)
    sentence: str  # the verbatim sentence ("" unless consent)


TURN_REF_INDEX_DIGITS = 9


def turn_ref_parse(ref: str) -> tuple[str, int] | None:
    """``"session_id#turn_index"`` as (session, index), or None when unreadable."""
    session, sep, index = ref.rpartition("#")
    if not sep or not session or not index.isdigit() or len(index) > TURN_REF_INDEX_DIGITS:
        return None
    return session, int(index)


def cited_turns(*, agent: Agent, turns: list[str]) -> list[tuple[str, str]]:
    """The cited refs that are user turns posted by ``agent``'s harness, as (ref, text).

    Another agent's harness, the agent's own token, or a turn of another workspace
    backs nothing for this agent."""
    refs = {parsed: ref for ref in turns if (parsed := turn_ref_parse(ref)) is not None}
    if not refs:
        return []
    match = Q()
    for session, index in refs:
        match |= Q(session_id=session, turn_index=index)
    rows = (
        ConversationTurn.objects.filter(
            match,
            workspace_id=agent.workspace_id,
            agent=agent,
            role=TurnRole.USER,
            channel=Channel.HARNESS,
        )
        .order_by("session_id", "turn_index", "id")
        .values_list("session_id", "turn_index", "content")
    )
    return [(refs[(session, index)], content) for session, index, content in rows]


def said_loosely(pieces: tuple[str, ...] | list[str], text: str) -> bool:
    """Every piece of the claim, folded, is a whole-word substring of the folded turn."""
    folded = fold_text(text)
    folded_pieces = [fold_text(piece) for piece in pieces]
    return bool(folded_pieces) and all(piece and piece in folded for piece in folded_pieces)


def consent_by_turn(*, agent: Agent, turns: list[str], claim: Claim) -> TurnMatch:
    """Whether one cited turn of ``agent``'s harness says ``claim`` as one of its
    own sentences (see the module docstring); each turn is judged alone, so a claim
    split across two turns is not said."""
    cited = cited_turns(agent=agent, turns=turns)
    loose_ref = ""
    for ref, text in cited:
        for sentence in claim.sentences:
            match = claim_match(sentence, text)
            if match.verbatim:
                consent = Consent(
                    basis="said", by=f"harness:{agent.name} said {ref}"[:200], mint=_MINT
                )
                return TurnMatch(True, consent, False, ref, match.sentence)
        if not loose_ref and said_loosely(claim.pieces, text):
            loose_ref = ref
    return TurnMatch(bool(cited), None, bool(loose_ref), loose_ref, "")


TURNS_SHOWN = 3


def _marked(text: str, words: set[str]) -> list[tuple[str, bool]]:
    parts: list[tuple[str, bool]] = []
    last = 0
    for match in _WORD.finditer(text):
        if match.group(0).casefold() in words:
            parts.append((text[last : match.start()], False))
            parts.append((match.group(0), True))
            last = match.end()
    parts.append((text[last:], False))
    return [part for part in parts if part[0]]


def turns_beside_many(items: list[tuple[int, int, list[str], Claim]]) -> dict[int, list[dict]]:
    """For each ``(key, agent_id, turns, claim)``: the cited turns of that agent's harness as a
    reviewer sees them beside the delta, ``{"ref", "verbatim", "parts": [(text, marked)]}``
    with the claim's words marked. One query for all of them."""
    wanted = []
    for key, agent, turns, claim in items:
        refs = [(ref, parsed) for ref in turns[:TURNS_SHOWN] if (parsed := turn_ref_parse(ref))]
        wanted.append((key, agent, refs, claim))
    match = Q()
    for _, agent, refs, _ in wanted:
        for _, (session, index) in refs:
            match |= Q(agent_id=agent, session_id=session, turn_index=index)
    if not match:
        return {}
    texts = {
        (agent_id, session, index): content
        for agent_id, session, index, content in ConversationTurn.objects.filter(
            match, role=TurnRole.USER, channel=Channel.HARNESS
        ).values_list("agent_id", "session_id", "turn_index", "content")
    }
    shown: dict[int, list[dict]] = {}
    for key, agent, refs, claim in wanted:
        words = {w.casefold() for piece in claim.pieces for w in _WORD.findall(piece)}
        for ref, (session, index) in refs:
            text = texts.get((agent, session, index))
            if text is None:
                continue
            verbatim = any(claim_match(sentence, text).verbatim for sentence in claim.sentences)
            shown.setdefault(key, []).append(
                {"ref": ref, "verbatim": verbatim, "parts": _marked(text, words)}
            )
    return shown
