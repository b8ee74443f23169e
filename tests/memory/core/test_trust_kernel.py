"""The trust kernel (memory/core/trust.py, actors.py, consent.py)."""

import pytest
from django.conf import settings

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.core.consent import Claim, Consent, consent_by_role, consent_by_turn
from memory.core.trust import birth_of, channel_weighs, confidence_channel_check
from memory.knowledge.conversations import turn_store
from memory.models import Channel, Role
from tests.factories.identity import AgentFactory, person_actor


@pytest.mark.parametrize(
    "build",
    [
        lambda: Actor(kind="person", label="user:mallory"),
        lambda: Actor(kind="agent", label="harness:x", channel=Channel.HARNESS),
        lambda: Actor(kind="system", label="system:x", channel=Channel.PERSON),
    ],
)
def test_an_actor_cannot_be_built_by_hand(build):
    with pytest.raises(TypeError):
        build()


def test_consent_cannot_be_built_by_hand():
    with pytest.raises(TypeError):
        Consent(basis="role", by="user:mallory")


def test_the_weighing_channels_are_the_harness_and_people():
    assert {c for c in Channel.values if channel_weighs(c)} == {Channel.HARNESS, Channel.PERSON}


@pytest.mark.parametrize(
    ("channel", "before", "after", "allowed"),
    [
        (Channel.HARNESS, 0.5, 0.65, True),
        (Channel.PERSON, 0.5, 0.2, True),
        (Channel.SYSTEM, 0.5, 0.4, True),
        (Channel.SYSTEM, 0.5, 0.6, False),
        (Channel.AGENT, 0.5, 0.4, False),
        (Channel.AGENT, 0.5, 0.6, False),
    ],
)
def test_the_system_channel_only_lowers(channel, before, after, allowed):
    if allowed:
        confidence_channel_check(channel=channel, before=before, after=after)
    else:
        with pytest.raises(ApplicationError) as refused:
            confidence_channel_check(channel=channel, before=before, after=after)
        assert refused.value.status_code == 403


def test_a_lesson_is_born_active_only_from_a_verified_weighing_channel():
    assert birth_of(channel=Channel.HARNESS, verified=True) == (
        "active",
        settings.CAIRN_LESSON_BIRTH_CONFIDENCE,
    )
    for channel, verified in ((Channel.AGENT, True), (Channel.HARNESS, False)):
        assert birth_of(channel=channel, verified=verified) == (
            "claimed",
            settings.CAIRN_LESSON_CLAIMED_CONFIDENCE,
        )


@pytest.mark.django_db
def test_consent_by_role_is_a_reviewers_only(workspace):
    from memory.identity.services import user_create

    with pytest.raises(ApplicationError):
        consent_by_role(actor=person_actor("outsider"), workspace=workspace, action="approve")
    user, _ = user_create(workspace=workspace, username="rita", role=Role.REVIEWER, password="pw")
    consent = consent_by_role(actor=Actor.for_user(user), workspace=workspace, action="approve")
    assert (consent.basis, consent.by) == ("role", "user:rita")


@pytest.mark.django_db
def test_only_this_agents_harness_turn_backs_its_claim():
    agent = AgentFactory()
    other = AgentFactory(workspace=agent.workspace)
    claim = Claim(("Use uv pip install for dependencies",), ("uv pip install",))
    text = "Use uv pip install for dependencies."
    for who, session, channel in (
        (other, "s-other", Channel.HARNESS),
        (agent, "s-own-token", Channel.AGENT),
        (agent, "s-split", Channel.HARNESS),
    ):
        content = text if session != "s-split" else "Use uv pip install"
        turn_store(workspace=agent.workspace, agent=who, session_id=session, role="user",
                   content=content, turn_index=1, channel=channel)  # fmt: skip
    turn_store(workspace=agent.workspace, agent=agent, session_id="s-split", role="user",
               content="for dependencies.", turn_index=2, channel=Channel.HARNESS)  # fmt: skip
    for refs in (["s-other#1"], ["s-own-token#1"], ["s-split#1", "s-split#2"]):
        assert consent_by_turn(agent=agent, turns=refs, claim=claim).consent is None, refs
    turn_store(workspace=agent.workspace, agent=agent, session_id="s-good", role="user",
               content=text, turn_index=1, channel=Channel.HARNESS)  # fmt: skip
    said = consent_by_turn(agent=agent, turns=["s-good#1"], claim=claim)
    assert said.consent is not None and said.consent.basis == "said"
