"""Moving fast through a queue: totals, filters, order, groups, bulk approve, notices."""

import re
from datetime import timedelta

import pytest

from memory.core.actors import Actor
from memory.models import AuditEvent, SkillDelta
from memory.skills.consent import delta_reject
from tests.factories.skills import (
    OBSERVED_CONTENT,
    OUTCOME_EVIDENCE,
    bulk_deltas,
    learning_agent,
    propose,
    register_v2,
)
from tests.factories.skills import (
    reviewer as make_reviewer,
)

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def agent(workspace):
    return learning_agent(workspace, name="gaia/chat")


@pytest.fixture
def reviewer(member_client, workspace):
    return member_client(workspace=workspace, role="reviewer")


def _cards(html: str) -> list[int]:
    return [
        int(pk) for pk in re.findall(r'<article class="card delta[^"]*" id="delta-(\d+)"', html)
    ]


def test_the_queue_says_how_many_wait_and_pages_do_not_hide_it(reviewer, agent):
    bulk_deltas(agent, 7)
    html = reviewer.get("/deltas/staged/?size=5").content.decode()
    assert '<b id="queue-total-staged">7</b> waiting · 5 on this page' in html
    assert len(_cards(html)) == 5


def test_filters_by_kind_skill_and_agent_with_a_matching_total(reviewer, agent, workspace):
    pref = propose(agent, "Escalate CFO threads after 48 hours.")
    hint = propose(
        agent, kind="tool-hint", section="triage-inbox", payload={"prefer": ["pre_scan_inbox"]}
    )
    other = learning_agent(workspace, name="hermes/mail", register=False)
    theirs = propose(other, "Keep replies short.", section="drafting-replies")
    html = reviewer.get("/deltas/staged/?kind=tool-hint", **HX).content.decode()
    assert _cards(html) == [hint.pk] and "<b>1</b> matching" in html
    html = reviewer.get(f"/deltas/staged/?agent={other.pk}", **HX).content.decode()
    assert _cards(html) == [theirs.pk]
    assert set(_cards(reviewer.get("/deltas/staged/?kind=bogus").content.decode())) == {
        pref.pk,
        hint.pk,
        theirs.pk,
    }
    page = reviewer.get("/deltas/staged/").content.decode()
    assert 'id="q-skill"' in page and "triage-inbox (3)" in page
    assert "gaia/chat (2)" in page and "hermes/mail (1)" in page


def test_sorts_oldest_first_by_default_newest_on_request_and_groups_by_skill(reviewer, agent):
    first = propose(agent, "Escalate CFO threads after 48 hours.")
    second = propose(agent, "Keep replies short.", section="drafting-replies")
    assert _cards(reviewer.get("/deltas/staged/").content.decode()) == [first.pk, second.pk]
    newest = reviewer.get("/deltas/staged/?sort=newest", **HX).content.decode()
    assert _cards(newest) == [second.pk, first.pk]
    grouped = reviewer.get("/deltas/staged/?sort=skill", **HX).content.decode()
    assert grouped.count('class="group-title"') == 1 and "triage-inbox</a></h2>" in grouped


def test_each_card_says_how_long_it_has_waited_and_carries_its_shortcut_forms(reviewer, agent):
    delta = propose(agent)
    SkillDelta.objects.filter(pk=delta.pk).update(created_at=delta.created_at - timedelta(days=3))
    html = reviewer.get("/deltas/staged/").content.decode()
    assert re.search(r"waiting <time[^>]*>3\xa0days", html)
    # One that just arrived has waited "under a minute", not "0 minutes".
    fresh = propose(agent, "Sign with a first name.", section="drafting-replies")
    html = reviewer.get("/deltas/staged/").content.decode()
    card = html.split(f'id="delta-{fresh.pk}"')[1]
    assert re.search(r"waiting <time[^>]*>under a minute<", card)
    assert "0\xa0minutes" not in html
    assert 'data-card tabindex="-1"' in html
    assert 'data-key-action="approve"' in html and 'data-key-action="reject"' in html
    assert "js/queue.js" in html


# --- bulk approve ---------------------------------------------------------------------


def test_bulk_approve_approves_the_ticked_trusted_deltas_with_one_reason(reviewer, agent):
    a = propose(agent, "Escalate CFO threads after 48 hours.")
    b = propose(agent, "Keep replies short.", section="drafting-replies")
    untouched = propose(agent, "Sign with a first name.", section="drafting-replies")
    response = reviewer.post(
        "/deltas/staged/approve/", {"ids": [a.pk, b.pk], "reason": "all asked for"}, **HX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert _cards(html) == [untouched.pk] and "Approved 2 of 2." in html
    assert set(SkillDelta.objects.filter(status="active").values_list("pk", flat=True)) == {
        a.pk,
        b.pk,
    }
    events = AuditEvent.objects.filter(action="delta.approve")
    assert {e.reason for e in events} == {"all asked for"} and events.count() == 2


def test_bulk_approve_never_touches_quarantine_and_refuses_a_blocked_ledger(reviewer, agent):
    ok = propose(agent, "Escalate CFO threads after 48 hours.")
    blocked = propose(
        agent, "Offer two slots.", section="drafting-replies", provenance=OUTCOME_EVIDENCE
    )
    untrusted = propose(agent, "Be terse.", section="drafting-replies", provenance=OBSERVED_CONTENT)
    page = reviewer.get("/deltas/staged/").content.decode()
    assert f'name="ids" value="{ok.pk}"' in page
    assert f'name="ids" value="{blocked.pk}"' not in page  # no box while the bar is unmet
    response = reviewer.post(
        "/deltas/staged/approve/",
        {"ids": [ok.pk, blocked.pk, untrusted.pk], "reason": "fine"},
        **HX,
    )
    html = response.content.decode()
    assert "Approved 1 of 3" in html and "1 no longer staged" in html
    assert f"#{blocked.pk}: " in html
    statuses = dict(SkillDelta.objects.values_list("pk", "status"))
    assert statuses == {ok.pk: "active", blocked.pk: "staged", untrusted.pk: "quarantined"}


def test_bulk_approve_needs_a_reason_ticks_and_the_reviewer_role(
    reviewer, agent, member_client, workspace
):
    delta = propose(agent)
    no_reason = reviewer.post("/deltas/staged/approve/", {"ids": [delta.pk]}, **HX)
    assert no_reason.status_code == 422 and "Say why" in no_reason.content.decode()
    none = reviewer.post("/deltas/staged/approve/", {"reason": "x"}, **HX)
    assert none.status_code == 422 and "Tick at least one" in none.content.decode()
    plain = reviewer.post("/deltas/staged/approve/", {"reason": "x"})
    assert plain.status_code == 303
    assert reviewer.get("/deltas/staged/approve/").status_code == 405
    viewer = member_client(workspace=workspace, role="viewer")
    refused = viewer.post("/deltas/staged/approve/", {"ids": [delta.pk], "reason": "x"})
    assert refused.status_code == 403
    assert SkillDelta.objects.get(pk=delta.pk).status == "staged"


# --- the orphan notice closes itself --------------------------------------------------


def test_the_orphan_notice_closes_when_its_orphans_are_all_handled(reviewer, agent, workspace):
    from memory.skills.consent import delta_approve

    person = Actor.for_user(make_reviewer(workspace, username="ada"))
    one = propose(agent, "Escalate CFO threads after 48 hours.")
    two = propose(agent, "Keep replies short.", section="drafting-replies")
    delta_approve(delta=one, actor=person, reason="ok")
    delta_approve(delta=two, actor=person, reason="ok")
    register_v2(workspace)
    banner = 'data-testid="orphan-notice"'
    assert banner in reviewer.get("/deltas/orphans/").content.decode()
    # The escalation section was rewritten (stale): it is re-approved on its own card.
    response = reviewer.post(
        f"/deltas/orphans/{one.pk}/reapprove/", {"reason": "still right"}, **HX
    )
    assert response.status_code == 200
    # One orphan left: the notice is still open, and counts it.
    html = reviewer.get("/deltas/orphans/").content.decode()
    assert banner in html and "still needs re-approval (of 2 it orphaned)" in html
    delta_reject(delta=SkillDelta.objects.get(pk=two.pk), actor=person, reason="gone")
    assert banner not in reviewer.get("/deltas/orphans/").content.decode()
    dashboard = reviewer.get("/dashboard/").content.decode()
    assert banner not in dashboard
    assert re.search(r"<b>0</b> <span class=\"hint\">notices? of orphaned deltas", dashboard)
