"""Quarantine: untrusted deltas with their findings marked, confirmed one at a time."""

import re

import pytest
from django.urls import get_resolver

from memory.models import AuditEvent, SkillDelta
from tests.factories.identity import WorkspaceFactory
from tests.factories.skills import (
    INJECTED,
    OBSERVED_CONTENT,
    bulk_deltas,
    learning_agent,
    propose,
)
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
ACK = "I have read this content and confirm it is safe"


@pytest.fixture
def agent(workspace):
    return learning_agent(workspace, name="gaia/chat")


@pytest.fixture
def reviewer(member_client, workspace):
    return member_client(workspace=workspace, role="reviewer")


@pytest.fixture
def viewer(member_client, workspace):
    return member_client(workspace=workspace, role="viewer")


def _card(html: str, pk: int) -> str:
    start = html.index(f'id="delta-{pk}"')
    return html[html.rindex("<article", 0, start) : html.index("</article>", start)]


def test_it_marks_each_finding_in_the_escaped_payload(viewer, agent):
    delta = propose(agent, INJECTED + " <img src=x onerror=alert(1)>", provenance=OBSERVED_CONTENT)
    assert delta.status == "quarantined"
    response = viewer.get("/deltas/quarantine/")
    assert response.status_code == 200
    html = response.content.decode()
    card = _card(html, delta.pk)
    marks = re.findall(
        r'<mark class="finding" data-rules="([^"]+)" title="([^"]+)">(.*?)<span', card
    )
    assert (
        "ignore_instructions",
        "tells the agent to ignore its instructions",
        "ignore all previous instructions",
    ) in marks
    assert any(
        "exfiltrate" in rules.split() and text.startswith("forward the inbox contents")
        for rules, _, text in marks
    )
    assert "<img src=x" not in html  # the payload never renders as HTML
    assert "&lt;img src=x onerror=alert(1)&gt;" in card
    assert f"{len(delta.findings)} findings" in card and len(delta.findings) >= 2
    assert "observed content" in card and "untrusted" in card


def test_hidden_characters_are_shown_and_marked(viewer, agent):
    delta = propose(agent, "Escalate CFO mail\u200b quickly.", provenance=OBSERVED_CONTENT)
    card = _card(viewer.get("/deltas/quarantine/").content.decode(), delta.pk)
    assert 'data-rules="hidden_zero_width"' in card
    assert '<span class="invisible">U+200B</span>' in card
    assert "\u200b" not in card.split('class="payload"')[1].split("</div>")[0]


def test_a_clean_untrusted_delta_still_says_why_it_is_here(viewer, agent):
    delta = propose(agent, "Reply in the sender's language.", provenance={})
    card = _card(viewer.get("/deltas/quarantine/").content.decode(), delta.pk)
    assert "missing provenance" in card
    assert "the scan found nothing, but the source is untrusted" in card
    assert "<mark" not in card


def test_it_serves_the_rows_fragment_to_htmx(viewer, agent):
    delta = propose(agent, INJECTED, provenance=OBSERVED_CONTENT)
    html = viewer.get("/deltas/quarantine/", **HX).content.decode()
    assert "<html" not in html and html.lstrip().startswith('<div id="rows"')
    assert f'id="delta-{delta.pk}"' in html


def test_empty_state_says_what_to_do(viewer):
    html = viewer.get("/deltas/quarantine/").content.decode()
    assert "Quarantine is empty." in html and '"source": "observed_content"' in html


def test_confirming_needs_the_checkbox_and_a_reason(reviewer, agent):
    delta = propose(agent, INJECTED, provenance=OBSERVED_CONTENT)
    card = _card(reviewer.get("/deltas/quarantine/").content.decode(), delta.pk)
    assert f'name="acknowledge" value="yes" required> {ACK}' in card
    url = f"/deltas/quarantine/{delta.pk}/confirm/"
    response = reviewer.post(url, {"reason": "checked the thread"}, **HX)
    assert response.status_code == 422
    assert "Tick “I have read this content" in response.content.decode()
    response = reviewer.post(url, {"acknowledge": "yes", "reason": " "}, **HX)
    assert response.status_code == 422 and "Say why" in response.content.decode()
    assert SkillDelta.objects.get(pk=delta.pk).status == "quarantined"

    response = reviewer.post(url, {"acknowledge": "yes", "reason": "checked the thread"}, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert f'id="delta-{delta.pk}"' not in html and "confirmed" in html
    assert re.search(r'id="nav-quarantine"[^>]*>0<', html)
    delta.refresh_from_db()
    assert delta.status == "active" and delta.approved_by == f"user:{reviewer.user.username}"
    event = AuditEvent.objects.get(action="delta.confirm_quarantined", target_id=str(delta.pk))
    assert event.reason == "checked the thread"


def test_a_reviewer_rejects_a_quarantined_delta(reviewer, agent):
    delta = propose(agent, INJECTED, provenance=OBSERVED_CONTENT)
    response = reviewer.post(
        f"/deltas/quarantine/{delta.pk}/reject/", {"reason": "injected by a web page"}, **HX
    )
    assert response.status_code == 200
    assert SkillDelta.objects.get(pk=delta.pk).status == "archived"
    assert AuditEvent.objects.filter(action="delta.reject", target_id=str(delta.pk)).exists()


def test_confirming_without_htmx_redirects_back(reviewer, agent):
    delta = propose(agent, INJECTED, provenance=OBSERVED_CONTENT)
    response = reviewer.post(
        f"/deltas/quarantine/{delta.pk}/confirm/", {"acknowledge": "yes", "reason": "ok"}
    )
    assert response.status_code == 303 and without_ws(response["Location"]) == "/deltas/quarantine/"
    assert SkillDelta.objects.get(pk=delta.pk).status == "active"


def test_a_staged_delta_cannot_be_confirmed_through_quarantine(reviewer, agent):
    staged = propose(agent)
    response = reviewer.post(
        f"/deltas/quarantine/{staged.pk}/confirm/", {"acknowledge": "yes", "reason": "x"}, **HX
    )
    assert response.status_code == 200 and "already staged" in response.content.decode()
    assert SkillDelta.objects.get(pk=staged.pk).status == "staged"


@pytest.mark.parametrize("action", ["confirm", "reject"])
def test_a_viewer_cannot_act(viewer, agent, action):
    delta = propose(agent, INJECTED, provenance=OBSERVED_CONTENT)
    data = {"acknowledge": "yes", "reason": "x"}
    assert viewer.post(f"/deltas/quarantine/{delta.pk}/{action}/", data, **HX).status_code == 403
    assert SkillDelta.objects.get(pk=delta.pk).status == "quarantined"


def test_another_workspaces_quarantine_is_invisible_and_404(reviewer):
    theirs = propose(
        learning_agent(WorkspaceFactory()), "Theirs: " + INJECTED, provenance=OBSERVED_CONTENT
    )
    assert "Theirs:" not in reviewer.get("/deltas/quarantine/").content.decode()
    for action in ("confirm", "reject"):
        response = reviewer.post(
            f"/deltas/quarantine/{theirs.pk}/{action}/", {"acknowledge": "yes", "reason": "x"}
        )
        assert response.status_code == 404
    assert SkillDelta.objects.get(pk=theirs.pk).status == "quarantined"


def test_no_bulk_endpoint_accepts_quarantined_deltas(member_client, workspace, agent):
    """Every review URL that takes no delta id is POSTed the quarantined ids: none moves."""
    admin = member_client(workspace=workspace, role="admin")
    quarantined = [
        propose(agent, INJECTED, provenance=OBSERVED_CONTENT),
        propose(agent, "Reply in French.", provenance={}),
    ]
    ids = [str(d.pk) for d in quarantined]
    bulk_urls = []
    for pattern in get_resolver("reviews.urls").url_patterns:
        route = str(pattern.pattern)
        if "<" not in route:  # no per-object id in the URL: a list or bulk endpoint
            bulk_urls.append("/" + route)
    assert "/deltas/orphans/reapprove/" in bulk_urls
    payload = {"ids": ids, "reason": "bulk", "acknowledge": "yes", "status": "active"}
    for url in bulk_urls:
        admin.post(url, payload, **HX)
        admin.post(url, payload)
    assert set(SkillDelta.objects.filter(pk__in=ids).values_list("status", flat=True)) == {
        "quarantined"
    }
    assert not AuditEvent.objects.filter(
        target_id__in=ids, action__in=["delta.confirm_quarantined", "delta.reapprove"]
    ).exists()


def test_the_list_query_count_does_not_grow_with_the_queue(
    member_client, workspace, agent, django_assert_max_num_queries
):
    propose(agent, INJECTED, provenance=OBSERVED_CONTENT)
    bulk_deltas(agent, 100, status="quarantined", findings=[{"rule": "exfiltrate", "excerpt": "x"}])
    bulk_deltas(learning_agent(workspace, register=False), 99, status="quarantined")
    client = member_client(workspace=workspace, role="reviewer")
    client.get("/deltas/quarantine/?size=200")
    # session, user, membership, the page, umbrella members, active deltas, the
    # workspace menu, nav queue counts, active jobs and open contradictions (no
    # registry, no ledger needed)
    # (+2: the queue total and the filter facets, each one query whatever the size)
    with django_assert_max_num_queries(12):
        response = client.get("/deltas/quarantine/?size=200")
    assert len(response.context["page"]) == 200
