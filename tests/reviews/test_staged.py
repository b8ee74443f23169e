"""Staged deltas: diffs of the effective skill, trust progress, approve and reject."""

import re

import pytest

from memory.core.actors import Actor
from memory.models import AuditEvent, SkillDelta
from tests.factories.identity import WorkspaceFactory
from tests.factories.skills import (
    OUTCOME_EVIDENCE,
    bulk_deltas,
    harness_feedback,
    learning_agent,
    propose,
)
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


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
    start = html.index(f'<article class="card delta" id="delta-{pk}"')
    return html[start : html.index("</article>", start)]


# --- the list -------------------------------------------------------------------


def test_it_lists_staged_deltas_with_their_diff_as_a_full_page(viewer, agent):
    delta = propose(agent, "Escalate anything from the CFO after 48 hours, not 72.")
    response = viewer.get("/deltas/staged/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and 'id="rows"' in html
    card = _card(html, delta.pk)
    assert "triage-inbox" in card and "#escalation" in card and "gaia/chat" in card
    assert "user instruction" in card and "sess_91f3#12" in card  # provenance and turns
    # The diff: the learned line is the one change, shown inside its own section (the
    # hunk names it, the section's last line is its neighbour); the base is grey context.
    added = re.findall(
        r'<div class="dl add"[^>]*>.*?<span class="tx"[^>]*>(.*?)</span></div>', card
    )
    assert added == ["- Escalate anything from the CFO after 48 hours, not 72."]
    assert '<b class="hunk-section">## Escalation</b>' in card
    assert "Learned adjustments</" not in card
    unified = card[card.index('aria-label="Unified diff"') : card.index("Side-by-side diff")]
    assert unified.index("without a reply.") < unified.index("after 48 hours, not 72.")
    assert unified.index("after 48 hours, not 72.") < unified.index("## Drafting replies")
    assert '<span class="add">+1</span> <span class="del">−0</span>' in card
    assert '<div class="dl ctx"' in card and "Keep replies short and polite." in card
    assert '<div class="dl del"' not in card
    assert response["Vary"].count("HX-Request") == 1


def test_it_serves_the_rows_fragment_to_htmx(viewer, agent):
    delta = propose(agent)
    response = viewer.get("/deltas/staged/", **HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and html.lstrip().startswith('<div id="rows"')
    assert f'id="delta-{delta.pk}"' in html


def test_a_tool_hint_diffs_the_tool_list(viewer, agent):
    delta = propose(
        agent,
        kind="tool-hint",
        section="triage-inbox",
        payload={"prefer": ["pre_scan_inbox"], "drop": ["summarize_thread"]},
    )
    card = _card(viewer.get("/deltas/staged/").content.decode(), delta.pk)
    assert '<span class="tx" role="cell">tools: [triage_inbox, summarize_thread]</span>' in card
    assert '<span class="tx" role="cell">tools: [triage_inbox, pre_scan_inbox]</span>' in card
    removed = card.index('class="dl del"')
    assert removed < card.index('class="dl add"')


def test_the_diff_is_against_the_active_deltas_not_the_bare_base(viewer, agent, workspace):
    from memory.skills.consent import delta_approve
    from tests.factories.skills import reviewer as make_reviewer

    active = propose(agent, "Sign replies with a first name only.", section="drafting-replies")
    delta_approve(delta=active, actor=Actor.for_user(make_reviewer(workspace)), reason="ok")
    delta = propose(agent, "Escalate CFO threads after 48 hours.")
    card = _card(viewer.get("/deltas/staged/").content.decode(), delta.pk)
    # The active delta is already in the "without" side (in its own section, beyond this
    # hunk's context): only the new line is added, in its own section.
    added = re.findall(
        r'<div class="dl add"[^>]*>.*?<span class="tx"[^>]*>(.*?)</span></div>', card
    )
    assert added == ["- Escalate CFO threads after 48 hours."]
    assert '<b class="hunk-section">## Escalation</b>' in card


def test_payload_html_is_escaped_in_the_diff(viewer, agent):
    delta = propose(agent, "Reply with <b>bold</b> greetings & <script>alert(1)</script> never.")
    html = viewer.get("/deltas/staged/").content.decode()
    card = _card(html, delta.pk)
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in card and "&amp;" in card


def test_outcome_evidence_shows_ledger_progress_and_cannot_be_approved_yet(reviewer, agent):
    delta = propose(
        agent, "Offer two slots.", section="drafting-replies", provenance=OUTCOME_EVIDENCE
    )
    for positive in (True, True, True):
        harness_feedback(agent=agent, action_type="reply", scope=delta.scope, positive=positive)
    card = _card(reviewer.get("/deltas/staged/").content.decode(), delta.pk)
    assert "<b>3 of 5</b> samples at ≥ 0.85" in card
    assert '<progress max="5" value="3"' in card
    assert '<button type="button" class="primary" disabled' in card
    assert "Approval needs a track record" in card
    assert f"/deltas/staged/{delta.pk}/approve/" not in card  # no approve form at all
    # The service refuses anyway, with the progress in its message.
    response = reviewer.post(f"/deltas/staged/{delta.pk}/approve/", {"reason": "looks fine"}, **HX)
    assert response.status_code == 422
    assert "3 of 5 samples" in response.content.decode()
    assert SkillDelta.objects.get(pk=delta.pk).status == "staged"


def test_outcome_evidence_over_the_bar_can_be_approved(reviewer, agent):
    delta = propose(
        agent, "Offer two slots.", section="drafting-replies", provenance=OUTCOME_EVIDENCE
    )
    for _ in range(5):
        harness_feedback(agent=agent, action_type="reply", scope=delta.scope, positive=True)
    card = _card(reviewer.get("/deltas/staged/").content.decode(), delta.pk)
    assert "bar met" in card and "disabled" not in card
    response = reviewer.post(f"/deltas/staged/{delta.pk}/approve/", {"reason": "5 of 5"}, **HX)
    assert response.status_code == 200
    delta.refresh_from_db()
    assert (delta.status, delta.approval_samples, delta.approval_positive) == ("active", 5, 5)


def test_empty_state_says_what_to_do(viewer):
    html = viewer.get("/deltas/staged/").content.decode()
    assert "No staged deltas." in html
    assert "POST /api/v1/skills/{name}/deltas/" in html


def test_it_filters_by_skill_and_agent(viewer, agent, workspace):
    other = learning_agent(workspace, name="claude-code", register=False)
    mine, theirs = propose(agent), propose(other)
    html = viewer.get(f"/deltas/staged/?agent={agent.pk}", **HX).content.decode()
    assert f'id="delta-{mine.pk}"' in html and f'id="delta-{theirs.pk}"' not in html
    assert "show all" in html
    assert (
        f'id="delta-{mine.pk}"' in viewer.get("/deltas/staged/?skill=triage-inbox").content.decode()
    )
    none = viewer.get("/deltas/staged/?skill=nope", **HX).content.decode()
    assert f'id="delta-{mine.pk}"' not in none and "No staged deltas match this filter." in none


def test_it_pages_oldest_first_without_losing_any(viewer, agent):
    deltas = bulk_deltas(agent, 7)
    first = viewer.get("/deltas/staged/?size=3").context["page"]
    assert [d.pk for d in first] == [d.pk for d in deltas[:3]]
    second = viewer.get(f"/deltas/staged/{first.next_query}", **HX).context["page"]
    third = viewer.get(f"/deltas/staged/{second.next_query}").context["page"]
    assert [d.pk for d in second] + [d.pk for d in third] == [d.pk for d in deltas[3:]]
    assert third.next_cursor is None


def test_the_list_query_count_does_not_grow_with_the_queue(
    member_client, workspace, agent, django_assert_max_num_queries
):
    from memory.skills.consent import delta_approve
    from tests.factories.skills import reviewer as make_reviewer

    approved = propose(agent, "Sign with a first name.", section="drafting-replies")
    delta_approve(delta=approved, actor=Actor.for_user(make_reviewer(workspace)), reason="ok")
    propose(agent, kind="tool-hint", section="triage-inbox", payload={"prefer": ["pre_scan_inbox"]})
    second = learning_agent(workspace, register=False)
    bulk_deltas(agent, 100)
    bulk_deltas(second, 100, provenance_source="outcome_evidence", scope="triage:cfo")
    client = member_client(workspace=workspace, role="viewer")
    client.get("/deltas/staged/?size=200")
    # session, user, membership, the page, its umbrella members, the active deltas of
    # its (agent, skill) pairs, their tool registries, the ledger tallies of its scopes
    # and their latest samples, the workspace menu, and the nav's queue counts, active
    # jobs and open contradictions: 13, for 2 or 200.
    # (+2: the queue total and the filter facets, each one query whatever the size;
    # +1: the cited turns shown beside untrusted user_instruction deltas, one query)
    with django_assert_max_num_queries(16):
        response = client.get("/deltas/staged/?size=200")
    assert len(response.context["page"]) == 200


# --- approving and rejecting ------------------------------------------------------


def test_a_reviewer_approves_via_htmx_and_the_card_goes_away(reviewer, agent, workspace):
    delta = propose(agent)
    propose(agent, "Keep it short.", section="drafting-replies")
    response = reviewer.post(f"/deltas/staged/{delta.pk}/approve/", {"reason": "as I said"}, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert f'id="delta-{delta.pk}"' not in html  # nothing replaces the card: it is removed
    assert 'id="nav" class="nav" aria-label="Main" hx-swap-oob="true"' in html
    assert re.search(r'id="nav-staged"[^>]*>1<', html)  # the counter, out of band
    assert 'id="toasts" hx-swap-oob="beforeend"' in html and "approved" in html
    delta.refresh_from_db()
    assert delta.status == "active" and delta.approved_by == f"user:{reviewer.user.username}"
    event = AuditEvent.objects.get(action="delta.approve", target_id=str(delta.pk))
    assert event.reason == "as I said" and event.workspace == workspace


def test_approving_without_htmx_redirects_back_with_a_message(reviewer, agent):
    delta = propose(agent)
    response = reviewer.post(f"/deltas/staged/{delta.pk}/approve/", {"reason": "ok"})
    assert response.status_code == 303 and without_ws(response["Location"]) == "/deltas/staged/"
    assert "approved" in reviewer.get("/deltas/staged/").content.decode()


def test_a_reviewer_rejects_with_a_reason(reviewer, agent):
    delta = propose(agent)
    response = reviewer.post(f"/deltas/staged/{delta.pk}/reject/", {"reason": "too broad"}, **HX)
    assert response.status_code == 200
    delta.refresh_from_db()
    assert delta.status == "archived"
    assert AuditEvent.objects.get(action="delta.reject", target_id=str(delta.pk)).reason == (
        "too broad"
    )


@pytest.mark.parametrize("action", ["approve", "reject"])
def test_an_empty_reason_is_refused_in_the_card(reviewer, agent, action):
    delta = propose(agent)
    response = reviewer.post(f"/deltas/staged/{delta.pk}/{action}/", {"reason": "  "}, **HX)
    assert response.status_code == 422
    html = response.content.decode()
    assert html.lstrip().startswith(f'<article class="card delta" id="delta-{delta.pk}"')
    assert "Say why" in html and 'aria-invalid="true"' in html
    assert SkillDelta.objects.get(pk=delta.pk).status == "staged"


@pytest.mark.parametrize(
    "reason",
    [
        "ok, token ghp_Zx81Qw7Er6Ty5Ui4Op3As2Df1Gh0Jk9Lm8Nb",
        "ok ghp_Zx81Qw7E\u200br6Ty5Ui4Op3As2Df1Gh0Jk9Lm8Nb",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ],
)
def test_a_reason_holding_a_secret_is_refused_and_nothing_is_audited(reviewer, agent, reason):
    delta = propose(agent)
    response = reviewer.post(f"/deltas/staged/{delta.pk}/approve/", {"reason": reason}, **HX)
    assert response.status_code == 422
    assert "never stores secrets" in response.content.decode()
    assert SkillDelta.objects.get(pk=delta.pk).status == "staged"
    assert not AuditEvent.objects.filter(action="delta.approve").exists()


def test_a_delta_someone_else_already_handled_just_leaves_the_queue(reviewer, agent):
    delta = propose(agent)
    reviewer.post(f"/deltas/staged/{delta.pk}/reject/", {"reason": "no"}, **HX)
    response = reviewer.post(f"/deltas/staged/{delta.pk}/approve/", {"reason": "yes"}, **HX)
    assert response.status_code == 200
    assert "already archived" in response.content.decode()
    assert SkillDelta.objects.get(pk=delta.pk).status == "archived"


# --- roles and workspaces ------------------------------------------------------------


@pytest.mark.parametrize("action", ["approve", "reject"])
def test_a_viewer_cannot_act(viewer, agent, action):
    delta = propose(agent)
    response = viewer.post(f"/deltas/staged/{delta.pk}/{action}/", {"reason": "x"}, **HX)
    assert response.status_code == 403
    assert SkillDelta.objects.get(pk=delta.pk).status == "staged"
    assert not AuditEvent.objects.filter(target_id=str(delta.pk), actor__startswith="user:")


def test_a_viewer_reads_the_queue_without_action_buttons(viewer, agent):
    delta = propose(agent)
    card = _card(viewer.get("/deltas/staged/").content.decode(), delta.pk)
    assert "approve/" not in card and "Reviewers approve or reject." in card


def test_actions_need_post(reviewer, agent):
    delta = propose(agent)
    assert reviewer.get(f"/deltas/staged/{delta.pk}/approve/").status_code == 405


def test_another_workspaces_deltas_are_invisible_and_404(reviewer, agent):
    other_agent = learning_agent(WorkspaceFactory(), name="gaia/chat")
    theirs = propose(other_agent, "Theirs: escalate after 12 hours.")
    html = reviewer.get("/deltas/staged/").content.decode()
    assert "Theirs: escalate" not in html and f'id="delta-{theirs.pk}"' not in html
    for action in ("approve", "reject"):
        response = reviewer.post(f"/deltas/staged/{theirs.pk}/{action}/", {"reason": "x"}, **HX)
        assert response.status_code == 404
    assert SkillDelta.objects.get(pk=theirs.pk).status == "staged"


def test_the_admin_role_acts_too(member_client, workspace, agent):
    admin = member_client(workspace=workspace, role="admin")
    delta = propose(agent)
    assert (
        admin.post(f"/deltas/staged/{delta.pk}/approve/", {"reason": "ok"}, **HX).status_code == 200
    )
    assert SkillDelta.objects.get(pk=delta.pk).status == "active"


def test_actions_need_the_csrf_token(agent, workspace):
    from django.test import Client

    from tests.factories.skills import reviewer as make_reviewer

    client = Client(enforce_csrf_checks=True)
    client.force_login(make_reviewer(workspace))
    delta = propose(agent)
    response = client.post(f"/deltas/staged/{delta.pk}/approve/", {"reason": "ok"}, **HX)
    assert response.status_code == 403
    assert SkillDelta.objects.get(pk=delta.pk).status == "staged"


def test_the_ledger_shows_where_each_sample_came_from_and_links_the_outcome(reviewer, agent):
    from memory.lessons.outcomes import outcome_record
    from memory.models import Channel
    from tests.factories.lessons import passed_payload

    delta = propose(
        agent, "Offer two slots.", section="drafting-replies", provenance=OUTCOME_EVIDENCE
    )
    payload = passed_payload(in_play=[{"type": "delta", "id": delta.pk}])
    body, _ = outcome_record(
        agent=agent,
        outcome_id=payload["outcome_id"],
        session_id=payload["session_id"],
        project_remote=payload["project_remote"],
        approach=payload["approach"],
        checks=payload["checks"],
        in_play=payload["in_play"],
        channel=Channel.HARNESS,
    )
    harness_feedback(
        agent=agent, action_type="reply", scope=delta.scope, positive=False, sample_id="undo-7"
    )
    card = _card(reviewer.get("/deltas/staged/").content.decode(), delta.pk)
    # The backing outcome of the provenance is a sample too only if the delta was in play.
    assert f'href="/outcomes/{body["id"]}/"' in without_ws(card)
    assert f"outcome #{body['id']}" in card
    assert "from harness feedback <code>undo-7</code>" in card
    assert "negative" in card and "positive" in card
    outcome_page = reviewer.get(f"/outcomes/{body['id']}/")
    assert outcome_page.status_code == 200
