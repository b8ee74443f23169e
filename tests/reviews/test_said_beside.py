"""A delta whose cited turn only holds its words (not as one of the person's own
sentences) is staged as untrusted, and its card shows the turn with the words marked."""

import pytest

from memory.knowledge.conversations import turn_store
from memory.models import Channel
from tests.factories.skills import learning_agent, propose

pytestmark = pytest.mark.django_db

CLAIM = "Use uv pip install for dependencies."


@pytest.fixture
def agent(workspace):
    return learning_agent(workspace, name="gaia/chat")


def _said(agent, index, content):
    turn_store(workspace=agent.workspace, agent=agent, session_id="sess-b", role="user",
               content=content, turn_index=index, channel=Channel.HARNESS)  # fmt: skip
    return {"source": "user_instruction", "turns": [f"sess-b#{index}"]}


def test_a_negated_turn_stages_untrusted_with_the_turn_beside_it(agent, member_client, workspace):
    provenance = _said(agent, 1, "Never use uv pip install for dependencies.")
    delta = propose(agent, CLAIM, provenance=provenance, back=False)
    assert (delta.status, delta.trust) == ("staged", "untrusted")
    page = member_client(workspace=workspace, role="reviewer").get("/deltas/staged/")
    html = page.content.decode()
    assert f'data-testid="said-{delta.pk}"' in html
    card = html[html.index(f'data-testid="said-{delta.pk}"') :]
    card = card[: card.index("</dd>")]
    assert "Never <mark>use</mark>" in card
    assert "<mark>dependencies</mark>" in card


def test_the_persons_own_sentence_is_trusted_and_shows_no_warning(agent, member_client, workspace):
    provenance = _said(agent, 2, "Thanks. Use uv pip install for dependencies.")
    delta = propose(agent, CLAIM, provenance=provenance, back=False)
    assert (delta.status, delta.trust) == ("staged", "trusted")
    html = member_client(workspace=workspace, role="reviewer").get("/deltas/staged/").content
    assert f'data-testid="said-{delta.pk}"' not in html.decode()


def test_a_turn_saying_something_else_quarantines(agent):
    provenance = _said(agent, 3, "What's the weather?")
    delta = propose(agent, CLAIM, provenance=provenance, back=False)
    assert (delta.status, delta.trust) == ("quarantined", "untrusted")
