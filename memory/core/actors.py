"""Who acts: the one way every write names its author.

An ``Actor`` is an agent (an API token's agent), a person (a signed-in user in
the review UI) or the system (a job). It also carries the *channel* of trust the
write came through (SPEC section 2): ``agent`` (the model's own word),
``harness`` (what really ran), ``person`` or ``system``. Only the harness and
people move confidence or activate anything (:attr:`Actor.weighs`, from the one
set in :mod:`memory.core.trust`). Services take one instead of a label string
plus flags, so "was this a person?" is answered in one place, and a person's
role is checked by one helper, :func:`actor_require_role`.

Only the constructors below make an ``Actor``: building one by hand with any
kind and channel (``Actor(kind="person", ...)``) raises, because a person's or
the harness's word is what moves confidence and activates things.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cairn.errors import ApplicationError
from memory.core.trust import channel_weighs
from memory.models import Agent, ApiToken, Channel, Membership, Role, TokenScope, Workspace

REVIEW_ROLES = (Role.REVIEWER, Role.ADMIN)

# Held only by this module: the constructors pass it, a hand-built Actor cannot.
_MINT = object()
_KIND_CHANNELS = {
    "agent": {Channel.AGENT, Channel.HARNESS},
    "person": {Channel.PERSON},
    "system": {Channel.SYSTEM, Channel.AGENT},
}


@dataclass(frozen=True)
class Actor:
    """Who is writing: an agent (API token), a person (UI) or the system (a job)."""

    kind: str  # "agent" | "person" | "system"
    label: str  # for the audit log: "agent:gaia/chat", "user:alice", "system:tool-calls"
    agent: Agent | None = None
    user: Any = None
    channel: str = ""
    mint: object = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.mint is not _MINT:
            raise TypeError(
                "An Actor is made by its constructors (Actor.for_token, for_agent, "
                "for_user, system), never by hand."
            )
        if self.channel not in _KIND_CHANNELS.get(self.kind, ()):
            raise ValueError(f"a {self.kind} does not write through the {self.channel} channel")
        if self.kind == "person" and self.user is None:
            raise ValueError("a person is a signed-in user")
        if self.kind == "agent" and self.agent is None:
            raise ValueError("an agent actor names its agent")

    @classmethod
    def for_agent(cls, agent: Agent, *, channel: str = Channel.AGENT) -> Actor:
        """An agent writing through a token; ``channel`` is the token's scope of trust."""
        if channel not in (Channel.AGENT, Channel.HARNESS):
            raise ValueError(f"an agent writes through the agent or harness channel, not {channel}")
        label = f"agent:{agent.name}" if channel == Channel.AGENT else f"harness:{agent.name}"
        return cls(kind="agent", label=label, agent=agent, channel=str(channel), mint=_MINT)

    @classmethod
    def for_token(cls, token: ApiToken) -> Actor:
        channel = Channel.HARNESS if token.scope == TokenScope.HARNESS else Channel.AGENT
        return cls.for_agent(token.agent, channel=channel)

    @classmethod
    def for_user(cls, user) -> Actor:
        return cls(
            kind="person",
            label=f"user:{user.get_username()}",
            user=user,
            channel=str(Channel.PERSON),
            mint=_MINT,
        )

    @classmethod
    def system(cls, name: str) -> Actor:
        """A job. Its channel may lower a confidence, never raise one
        (``memory.core.trust.confidence_channel_check``)."""
        return cls(kind="system", label=f"system:{name}", channel=str(Channel.SYSTEM), mint=_MINT)

    @classmethod
    def system_relaying_agent(cls, name: str) -> Actor:
        """A job writing what it derived from the agent's own words: the agent channel."""
        return cls(kind="system", label=f"system:{name}", channel=str(Channel.AGENT), mint=_MINT)

    @property
    def weighs(self) -> bool:
        """True when what this actor reports may move confidence or activate anything."""
        return channel_weighs(self.channel)

    @property
    def is_harness(self) -> bool:
        return self.channel == Channel.HARNESS

    @property
    def is_person(self) -> bool:
        return self.kind == "person"

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"


def actor_require_role(
    actor: Actor, *, workspace: Workspace, roles: Iterable[str] = REVIEW_ROLES, action: str
) -> None:
    """403 unless ``actor`` is a signed-in person with one of ``roles`` in ``workspace``."""
    user = actor.user
    allowed = (
        actor.is_person
        and user is not None
        and getattr(user, "is_authenticated", False)
        and Membership.objects.filter(user=user, workspace=workspace, role__in=list(roles)).exists()
    )
    if not allowed:
        names = " or ".join(str(role) for role in roles)
        raise ApplicationError(
            f"Only a {names} of this workspace may {action}.",
            code="forbidden",
            status_code=403,
        )


def actor_require_person(actor: Actor, *, action: str) -> None:
    """403 unless a person acts (pin, seal, restore: decisions an agent never makes)."""
    if not actor.is_person:
        raise ApplicationError(f"Only a person may {action}.", code="forbidden", status_code=403)
