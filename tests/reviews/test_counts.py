"""Counters and badges stay right: out of band after every action, and polled."""

import re

import pytest

from tests.factories.skills import learning_agent, propose
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def _oob(html: str, element_id: str) -> str:
    match = re.search(rf'<[a-z]+ hx-swap-oob="true"[^>]* id="{element_id}"[^>]*>([^<]*)<', html)
    return match.group(1) if match else None


def test_the_poll_answers_every_counter_out_of_band(member_client, workspace):
    agent = learning_agent(workspace, name="gaia/chat")
    viewer = member_client(workspace=workspace, role="viewer")
    html = viewer.get("/counts/", **HX).content.decode()
    assert _oob(html, "nav-staged") == "0" and _oob(html, "dash-staged") == "0"
    propose(agent, "Escalate after 48 hours.")  # as an agent over the API would
    response = viewer.get("/counts/", **HX)
    html = response.content.decode()
    assert _oob(html, "nav-staged") == "1" and _oob(html, "dash-staged") == "1"
    assert _oob(html, "queue-total-staged") == "1"
    assert response["Cache-Control"] == "no-store"
    assert "<html" not in html


def test_pages_poll_the_counters(member_client, workspace):
    viewer = member_client(workspace=workspace, role="viewer")
    html = viewer.get("/dashboard/").content.decode()
    assert re.search(
        r'id="counts-poll"[^>]*hx-get="/counts/" hx-trigger="every 20s"', without_ws(html)
    )
    assert 'id="dash-staged"' in html


def test_a_poll_after_the_session_ended_is_quiet(client):
    response = client.get("/counts/", **HX)
    assert response.status_code == 204 and "HX-Redirect" not in response


def test_an_approval_updates_the_queue_total_and_dashboard_counts(member_client, workspace):
    agent = learning_agent(workspace, name="gaia/chat")
    delta = propose(agent, "Escalate after 48 hours.")
    propose(agent, "Keep replies short.", section="drafting-replies")
    reviewer = member_client(workspace=workspace, role="reviewer")
    page = reviewer.get("/deltas/staged/").content.decode()
    assert '<b id="queue-total-staged">2</b>' in page
    html = reviewer.post(
        f"/deltas/staged/{delta.pk}/approve/", {"reason": "ok"}, **HX
    ).content.decode()
    assert _oob(html, "queue-total-staged") == "1"
    assert _oob(html, "nav-staged") == "1" and _oob(html, "dash-staged") == "1"


def test_a_filtered_queue_total_is_not_overwritten_by_the_global_count(member_client, workspace):
    agent = learning_agent(workspace, name="gaia/chat")
    propose(agent, "Escalate after 48 hours.")
    reviewer = member_client(workspace=workspace, role="reviewer")
    page = reviewer.get("/deltas/staged/?kind=example").content.decode()
    assert 'id="queue-total-staged"' not in page


def test_revoking_a_token_updates_the_agents_active_token_line(member_client, workspace):
    from memory.core.actors import Actor
    from memory.identity.services import agent_create, token_issue

    admin = member_client(workspace=workspace, role="admin")
    actor = Actor.for_user(admin.user)
    agent = agent_create(workspace=workspace, name="bot", actor=actor)
    first = token_issue(agent=agent).token
    token_issue(agent=agent)
    html = admin.post(
        f"/agents/tokens/{first.pk}/revoke/", {"reason": "leaked"}, **HX
    ).content.decode()
    meta = re.search(
        rf'<p class="meta" id="agent-{agent.pk}-meta" hx-swap-oob="true">(.*?)</p>', html
    )
    assert meta and "1 active token ·" in meta.group(1)
    assert _oob(html, "nav-active-tokens") == "1" and _oob(html, "dash-active-tokens") == "1"


@pytest.mark.parametrize(
    "path, page",
    [
        ("/deltas/staged/", "guides/review-queue/"),
        ("/deltas/quarantine/", "concepts/deltas-and-consent/"),
        ("/deltas/orphans/", "guides/review-queue/"),
        ("/contradictions/", "concepts/lessons/"),
    ],
)
def test_every_empty_queue_says_what_fills_it_and_links_the_docs(
    member_client, workspace, settings, path, page
):
    settings.CAIRN_DOCS_URL = "https://docs.example.org/cairn"
    viewer = member_client(workspace=workspace, role="viewer")
    html = viewer.get(path).content.decode()
    empty = html[html.index("empty-state") :]
    assert f'href="https://docs.example.org/cairn/{page}" data-testid="docs-link"' in empty
    assert "POST /api/v1/" in empty or "reconcile job" in empty  # what fills it
