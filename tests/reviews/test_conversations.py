"""The conversation viewer, the rationale shown first, and the trust ledger's samples."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.core.actors import Actor
from memory.knowledge.conversations import tool_calls_log, turn_store
from memory.skills.trust import feedback_record
from tests.factories.identity import WorkspaceFactory
from tests.factories.skills import OUTCOME_EVIDENCE, learning_agent, propose
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def agent(workspace):
    return learning_agent(workspace, name="gaia/chat")


@pytest.fixture
def viewer(member_client, workspace):
    return member_client(workspace=workspace, role="viewer")


def _session(agent, session="sess_91f3"):
    start = timezone.now() - timedelta(minutes=10)
    for index, (role, text) in enumerate(
        [
            ("user", "Please triage my inbox."),
            ("assistant", "Done; the CFO thread waits 72 hours."),
            ("user", "Escalate anything from the CFO after 48 hours, not 72."),
        ],
        start=11,
    ):
        turn_store(
            workspace=agent.workspace,
            agent=agent,
            session_id=session,
            role=role,
            content=text,
            turn_index=index,
            at=start + timedelta(minutes=index - 10),
            channel="harness",  # what the harness reported: it backs a delta's provenance
        )
    tool_calls_log(
        workspace=agent.workspace,
        agent=agent,
        calls=[
            {
                "session_id": session,
                "tool": "triage_inbox",
                "operation_key": "triage:inbox",
                "ok": True,
                "at": start + timedelta(minutes=1, seconds=30),
            }
        ],
    )


def test_provenance_turns_link_to_the_conversation_with_the_cited_turns(viewer, agent):
    _session(agent)
    delta = propose(
        agent, provenance={"source": "user_instruction", "turns": ["sess_91f3#13", "odd"]}
    )
    card = viewer.get("/deltas/staged/").content.decode()
    link = "/conversations/?session=sess_91f3&amp;cite=13#turn-13"
    assert f'<a href="{link}"' in without_ws(card)
    assert "<code>odd</code>" in card  # not a session#index ref: plain text
    html = viewer.get("/conversations/?session=sess_91f3&cite=13").content.decode()
    assert 'class="turn role-user cited" id="turn-13" data-cited' in html
    assert 'id="turn-11"' in html and 'class="turn role-user" id="turn-11"' in html
    # The tool call sits between turns 11 and 12, in time order.
    assert html.index('id="turn-11"') < html.index("triage_inbox") < html.index('id="turn-12"')
    assert "Escalate anything from the CFO" in html
    assert delta.pk  # the card existed


def test_the_viewer_is_scoped_to_the_workspace_and_serves_a_fragment(viewer, agent):
    other = learning_agent(WorkspaceFactory(), name="other/agent")
    _session(other, session="sess_secret")
    html = viewer.get("/conversations/?session=sess_secret").content.decode()
    assert "No turns stored for this session" in html and "CFO" not in html
    _session(agent)
    fragment = viewer.get("/conversations/?session=sess_91f3&cite=abc&cite=12", **HX)
    text = fragment.content.decode()
    assert fragment.status_code == 200 and "<html" not in text and 'id="turns"' in text
    assert 'id="turn-12" data-cited' in text
    assert "Enter a session id" in viewer.get("/conversations/").content.decode()


def test_the_rationale_is_shown_first_on_the_card_and_the_page(viewer, agent):
    delta = propose(agent, rationale="The user asked for it in turn 12.")
    card = viewer.get("/deltas/staged/").content.decode()
    why = card.index(f'data-testid="rationale-{delta.pk}"')
    assert "The user asked for it in turn 12." in card
    assert why < card.index('class="diff"') and why < card.index("Provenance")
    page = viewer.get(f"/deltas/{delta.pk}/").content.decode()
    assert "The user asked for it in turn 12." in page


def test_the_trust_ledger_opens_to_its_samples(viewer, agent):
    delta = propose(
        agent, "Offer two slots.", section="drafting-replies", provenance=OUTCOME_EVIDENCE
    )
    feedback_record(
        actor=Actor.for_agent(agent, channel="harness"),
        sample_id="s-1",
        action_type="reply",
        scope=delta.scope,
        positive=True,
    )
    feedback_record(
        actor=Actor.for_agent(agent, channel="harness"),
        sample_id="s-2",
        action_type="reply",
        scope=delta.scope,
        positive=False,
        delta_ids=[delta.pk],
    )
    feedback_record(
        actor=Actor.for_agent(agent, channel="harness"),
        sample_id="s-3",
        action_type="reply",
        scope="skill:other",
        positive=True,
    )
    card = viewer.get("/deltas/staged/").content.decode()
    assert f'href="/deltas/{delta.pk}/#samples"' in without_ws(card)
    page = viewer.get(f"/deltas/{delta.pk}/").content.decode()
    samples = page[page.index('id="samples"') : page.index('id="history"')]
    assert samples.count("<tr>") == 3  # header + the two samples on this scope
    assert "positive" in samples and "negative" in samples
    assert f'<a href="/deltas/{delta.pk}/">#{delta.pk}</a>' in without_ws(samples)
