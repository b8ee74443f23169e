"""Who acts: the one way every write names its author.

An ``Actor`` is an agent (an API token's agent), a person (a signed-in user in
the review UI) or the system (a job). It also carries the *channel* of trust the
write came through (SPEC section 2): ``agent`` (the model's own word),
``harness`` (what really ran), ``person`` or ``system``. Only the harness and
people move confidence or activate anything (:attr:`Actor.weighs`). Services take one instead of a label
string plus flags, so "was this a person?" is answered in one place, and a
person's role is checked by one helper, :func:`actor_require_role`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cairn.errors import ApplicationError
from memory.models import Agent, ApiToken, Channel, Membership, Role, TokenScope, Workspace

REVIEW_ROLES = (Role.REVIEWER, Role.ADMIN)


@dataclass(frozen=True)
class Actor:
    """Who is writing: an agent (API token), a person (UI) or the system (a job)."""

    kind: str  # "agent" | "person" | "system"
    label: str  # for the audit log: "agent:gaia/chat", "user:alice", "system:tool-calls"
    agent: Agent | None = None
    user: Any = None
    channel: str = ""

    def __post_init__(self):
        if not self.channel:
            default = {"person": Channel.PERSON, "system": Channel.SYSTEM}.get(
                self.kind, Channel.AGENT
            )
            object.__setattr__(self, "channel", str(default))

    @classmethod
    def for_agent(cls, agent: Agent, *, channel: str = Channel.AGENT) -> Actor:
        """An agent writing through a token; ``channel`` is the token's scope of trust."""
        if channel not in (Channel.AGENT, Channel.HARNESS):
            raise ValueError(f"an agent writes through the agent or harness channel, not {channel}")
        label = f"agent:{agent.name}" if channel == Channel.AGENT else f"harness:{agent.name}"
        return cls(kind="agent", label=label, agent=agent, channel=str(channel))

    @classmethod
    def for_token(cls, token: ApiToken) -> Actor:
        channel = Channel.HARNESS if token.scope == TokenScope.HARNESS else Channel.AGENT
        return cls.for_agent(token.agent, channel=channel)

    @classmethod
    def for_user(cls, user) -> Actor:
        return cls(kind="person", label=f"user:{user.get_username()}", user=user)

    @classmethod
    def system(cls, name: str) -> Actor:
        return cls(kind="system", label=f"system:{name}")

    @property
    def weighs(self) -> bool:
        """True when what this actor reports may move confidence or activate anything."""
        return self.channel in (Channel.HARNESS, Channel.PERSON)

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
