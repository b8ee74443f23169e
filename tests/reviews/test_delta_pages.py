"""A delta's permalink page (its whole history) and each queue's "Decided" list."""

import pytest

from memory.core.actors import Actor
from memory.skills.consent import delta_approve, delta_reapprove, delta_reject, delta_revert
from tests.factories.identity import WorkspaceFactory
from tests.factories.skills import (
    INJECTED,
    OBSERVED_CONTENT,
    learning_agent,
    propose,
    register_v2,
)
from tests.factories.skills import (
    reviewer as make_reviewer,
)
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def agent(workspace):
    return learning_agent(workspace, name="gaia/chat")


@pytest.fixture
def person(workspace):
    return Actor.for_user(make_reviewer(workspace, username="ada"))


@pytest.fixture
def viewer(member_client, workspace):
    return member_client(workspace=workspace, role="viewer")


# --- the permalink page ---------------------------------------------------------------


def test_a_delta_page_shows_the_delta_and_its_whole_history(viewer, agent, person):
    delta = propose(agent, "Escalate anything from the CFO after 48 hours, not 72.")
    delta_approve(delta=delta, actor=person, reason="matches what I asked for")
    delta_revert(delta=delta, actor=person, reason="made replies worse")
    response = viewer.get(f"/deltas/{delta.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and "triage-inbox" in html and "#escalation" in html
    assert 'data-testid="delta-status">archived<' in html
    history = html[html.index('data-testid="delta-history"') :]
    # Oldest first: proposed (with the scan's verdict), approved, reverted, with who and why.
    proposed = history.index("Proposed")
    approved = history.index("Approved")
    reverted = history.index("Reverted")
    assert proposed < approved < reverted
    assert "injection scan: nothing found" in history
    assert "user:ada" in history
    assert "matches what I asked for" in history and "made replies worse" in history
    assert "staged → active" in history and "active → archived" in history
    assert "UTC" in history  # dates say their timezone
    # The diff is there, and no queue link for a delta that is no longer pending.
    assert "Escalate anything from the CFO" in html and "Review it in its queue" not in html


def test_a_pending_delta_page_links_to_its_card_in_the_queue(viewer, agent):
    delta = propose(agent, INJECTED, provenance=OBSERVED_CONTENT)
    html = without_ws(viewer.get(f"/deltas/{delta.pk}/").content.decode())
    assert f'href="/deltas/quarantine/#delta-{delta.pk}"' in html
    assert "injection scan: " in html and "nothing found" not in html  # the finding is named


def test_the_history_fragment_is_served_to_htmx(viewer, agent):
    delta = propose(agent)
    response = viewer.get(f"/deltas/{delta.pk}/", **HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and 'id="history"' in html


def test_a_delta_of_another_workspace_is_not_found(viewer):
    other = learning_agent(WorkspaceFactory(), name="other/agent")
    delta = propose(other)
    assert viewer.get(f"/deltas/{delta.pk}/").status_code == 404
    assert viewer.get("/deltas/999999/").status_code == 404


def test_the_page_needs_a_login(client, agent):
    delta = propose(agent)
    response = client.get(f"/deltas/{delta.pk}/")
    assert response.status_code == 302 and "/login" in response["Location"]


def test_cards_the_skill_page_and_the_audit_log_link_to_the_delta_page(viewer, agent, person):
    delta = propose(agent)
    link = f'href="/deltas/{delta.pk}/"'
    assert link in without_ws(viewer.get("/deltas/staged/").content.decode())
    delta_approve(delta=delta, actor=person, reason="ok")
    skill_page = viewer.get(f"/skills/triage-inbox/?agent={agent.pk}").content.decode()
    assert link in without_ws(skill_page)
    audit = viewer.get("/audit/").content.decode()
    assert (
        f'<a href="/deltas/{delta.pk}/">delta #{delta.pk}</a> to skill triage-inbox'
        in without_ws(audit)
    )


# --- the Decided lists ----------------------------------------------------------------


def test_staged_decided_lists_decisions_newest_first_with_who_and_why(viewer, agent, person):
    first = propose(agent, "Escalate CFO threads after 48 hours.")
    second = propose(agent, "Keep replies under five lines.", section="drafting-replies")
    waiting = propose(agent, "Sign with a first name.", section="drafting-replies")
    delta_approve(delta=first, actor=person, reason="asked for it")
    delta_reject(delta=second, actor=person, reason="too broad")
    response = viewer.get("/deltas/staged/decided/")
    assert response.status_code == 200
    html = response.content.decode()
    rows = html[html.index('<table class="decided"') :]
    assert rows.index(f"#{second.pk} triage-inbox") < rows.index(f"#{first.pk} triage-inbox")
    assert "rejected" in rows and "too broad" in rows and "approved" in rows
    assert "asked for it" in rows and "user:ada" in rows
    assert f"#{waiting.pk} " not in rows  # still waiting: not decided
    # The staged page links here, and the Decided page back.
    assert 'href="/deltas/staged/decided/"' in without_ws(
        viewer.get("/deltas/staged/").content.decode()
    )


def test_decided_filters_by_decision_person_and_skill(viewer, agent, person, workspace):
    approved = propose(agent, "Escalate CFO threads after 48 hours.")
    rejected = propose(agent, "Keep replies under five lines.", section="drafting-replies")
    delta_approve(delta=approved, actor=person, reason="fine")
    other_person = Actor.for_user(make_reviewer(workspace, username="bob"))
    delta_reject(delta=rejected, actor=other_person, reason="no")

    def shown(query: str) -> set[int]:
        html = without_ws(viewer.get(f"/deltas/staged/decided/?{query}", **HX).content.decode())
        return {pk for pk in (approved.pk, rejected.pk) if f'href="/deltas/{pk}/"' in html}

    assert shown("") == {approved.pk, rejected.pk}
    assert shown("decision=approved") == {approved.pk}
    assert shown("decision=rejected") == {rejected.pk}
    assert shown("actor=user:bob") == {rejected.pk}
    assert shown("skill=triage-inbox") == {approved.pk, rejected.pk}
    assert shown("skill=nope") == set()
    assert shown(f"agent={agent.pk}") == {approved.pk, rejected.pk}
    assert shown("decision=bogus") == {approved.pk, rejected.pk}  # unknown values are ignored
    assert (
        "No decisions match these filters"
        in viewer.get("/deltas/staged/decided/?skill=nope").content.decode()
    )
    # The agent filter is on the page (a select naming each agent), and it filters.
    page = viewer.get(f"/deltas/staged/decided/?agent={agent.pk}").content.decode()
    assert f'<option value="{agent.pk}" selected>gaia/chat</option>' in page
    other = learning_agent(workspace, name="other-bot", register=False)
    assert shown(f"agent={other.pk}") == set()


def test_each_queue_lists_only_what_left_it(viewer, agent, person, workspace):
    staged = propose(agent, "Escalate CFO threads after 48 hours.")
    untrusted = propose(agent, "Be terse.", section="drafting-replies", provenance=OBSERVED_CONTENT)
    delta_reject(delta=staged, actor=person, reason="staged no")
    delta_reject(delta=untrusted, actor=person, reason="quarantine no")
    orphan = propose(agent, "Cc the manager.")
    delta_approve(delta=orphan, actor=person, reason="ok")
    register_v2(workspace)  # orphans the active delta
    delta_reapprove(deltas=[orphan], actor=person, reason="still right")

    def ids(queue: str) -> set[int]:
        html = without_ws(viewer.get(f"/deltas/{queue}/decided/").content.decode())
        return {d.pk for d in (staged, untrusted, orphan) if f'href="/deltas/{d.pk}/"' in html}

    assert ids("staged") == {staged.pk, orphan.pk}  # orphan was approved from staged first
    assert ids("quarantine") == {untrusted.pk}
    assert ids("orphans") == {orphan.pk}
    orphans = viewer.get("/deltas/orphans/decided/").content.decode()
    assert "re-approved" in orphans and "still right" in orphans


def test_decided_lists_other_workspaces_decisions_never(viewer, person):
    other_ws = WorkspaceFactory()
    other = learning_agent(other_ws, name="other/agent")
    delta = propose(other)
    delta_approve(
        delta=delta, actor=Actor.for_user(make_reviewer(other_ws, username="eve")), reason="x"
    )
    html = viewer.get("/deltas/staged/decided/").content.decode()
    assert f'href="/deltas/{delta.pk}/"' not in html and "Nothing decided here yet" in html


# --- what the change touches ----------------------------------------------------------


def test_the_card_shows_the_anchored_section_in_full_and_a_side_by_side_view(viewer, agent):
    delta = propose(agent, "Escalate anything from the CFO after 48 hours, not 72.")
    html = viewer.get("/deltas/staged/").content.decode()
    start = html.index(f'data-testid="anchored-{delta.pk}"')
    anchored = html[start : html.index("</figure>", start)]
    assert "## Escalation\nEscalate a thread when it has been waiting longer than the" in anchored
    assert "Drafting replies" not in anchored  # only that section
    assert f'data-testid="split-{delta.pk}"' in html
    split = html[html.index('aria-label="Side-by-side diff"') :]
    assert '<span class="tx add" role="cell">- Escalate anything from the CFO' in split


def test_a_stale_orphan_shows_how_its_section_changed(viewer, agent, person, workspace):
    delta = propose(agent, "Escalate CFO threads after 48 hours.")
    delta_approve(delta=delta, actor=person, reason="ok")
    register_v2(workspace)  # rewrites the Escalation section
    html = viewer.get("/deltas/orphans/").content.decode()
    start = html.index(f'data-testid="section-change-{delta.pk}"')
    change = html[start : html.index("</figure>", start)]
    assert "1.0.0 → 2.0.0" in change
    assert '<div class="dl del"' in change and "follow-up window" in change
    assert '<div class="dl add"' in change and "one business day" in change
    assert change.index("follow-up window") < change.index("one business day")


# --- the diff a decision was made on ----------------------------------------------------


@pytest.fixture
def reviewer_client(member_client, workspace):
    return member_client(workspace=workspace, role="reviewer")


def _seen_digest(client, pk: int) -> str:
    import re

    html = without_ws(client.get("/deltas/staged/").content.decode())
    return re.search(
        rf'action="/deltas/staged/{pk}/approve/".*?name="seen" value="([0-9a-f]{{64}})"',
        html,
        re.S,
    ).group(1)


def test_a_decision_keeps_the_diff_shown_and_the_page_shows_it_after_the_skill_moves_on(
    reviewer_client, agent, workspace
):
    from memory.models import SkillDelta

    delta = propose(agent, "Escalate anything from the CFO after 48 hours, not 72.")
    seen = _seen_digest(reviewer_client, delta.pk)
    response = reviewer_client.post(
        f"/deltas/staged/{delta.pk}/approve/", {"reason": "as asked", "seen": seen}, **HX
    )
    assert response.status_code == 200
    delta = SkillDelta.objects.get(pk=delta.pk)
    assert delta.status == "active"
    assert len(delta.decision_seen["digest"]) == 64  # of the whole diff, context included
    assert delta.decision_seen["version"] == "1.0.0" and delta.decision_seen["with"] == [delta.pk]

    html = reviewer_client.get(f"/deltas/{delta.pk}/").content.decode()
    assert 'data-testid="decided-diff"' in html and 'data-testid="moved-on"' not in html

    register_v2(workspace)  # the skill moves on: the delta is orphaned, the base rewritten
    html = reviewer_client.get(f"/deltas/{delta.pk}/").content.decode()
    decided = html[
        html.index('data-testid="decided-diff"') : html.index(
            "</figure>", html.index('data-testid="decided-diff"')
        )
    ]
    assert "effective <b>triage-inbox</b> 1.0.0" in decided
    assert "The skill has moved on since" in decided
    assert '<b class="hunk-section">## Escalation</b>' in decided
    assert "after 48 hours, not 72." in decided


def test_another_line_approved_meanwhile_does_not_block_a_decision(reviewer_client, agent, person):
    from memory.models import SkillDelta

    delta = propose(agent, "Escalate anything from the CFO after 48 hours, not 72.")
    seen = _seen_digest(reviewer_client, delta.pk)
    # Someone approves another line nearby: the context moves, the change does not.
    other = propose(agent, "Name the thread's age when escalating.")
    delta_approve(delta=other, actor=person, reason="ok")
    response = reviewer_client.post(
        f"/deltas/staged/{delta.pk}/approve/", {"reason": "as asked", "seen": seen}, **HX
    )
    assert response.status_code == 200
    assert SkillDelta.objects.get(pk=delta.pk).status == "active"


def test_a_posted_change_that_is_not_the_current_one_is_refused(reviewer_client, agent):
    from memory.models import SkillDelta

    delta = propose(agent, "Escalate anything from the CFO after 48 hours, not 72.")
    response = reviewer_client.post(
        f"/deltas/staged/{delta.pk}/approve/", {"reason": "as asked", "seen": "0" * 64}, **HX
    )
    assert response.status_code == 422
    assert "changed since this card was shown" in response.content.decode()
    assert SkillDelta.objects.get(pk=delta.pk).status == "staged"


def test_a_rejection_keeps_its_diff_too(reviewer_client, agent):
    from memory.models import SkillDelta

    delta = propose(agent, "Keep replies short.", section="drafting-replies")
    reviewer_client.post(f"/deltas/staged/{delta.pk}/reject/", {"reason": "too broad"}, **HX)
    delta = SkillDelta.objects.get(pk=delta.pk)
    assert delta.status == "archived" and delta.decision_seen["digest"]
    html = reviewer_client.get(f"/deltas/{delta.pk}/").content.decode()
    assert 'data-testid="decided-diff"' in html and "## Drafting replies" in html


def test_an_archived_delta_says_who_rejected_or_reverted_it(viewer, agent, person):
    rejected = propose(agent, "Keep replies short.", section="drafting-replies")
    delta_reject(delta=rejected, actor=person, reason="too broad")
    html = viewer.get(f"/deltas/{rejected.pk}/").content.decode()
    assert ", rejected</span></h1>" in html  # not a bare "archived"
    ended = html.split('data-testid="delta-ended">')[1].split("</span>")[0]
    assert ended.startswith("rejected by <code>user:ada</code>") and "too broad" in ended
    reverted = propose(agent, "Escalate anything from the CFO after 48 hours, not 72.")
    delta_approve(delta=reverted, actor=person, reason="yes")
    delta_revert(delta=reverted, actor=person, reason="made replies worse")
    html = viewer.get(f"/deltas/{reverted.pk}/").content.decode()
    ended = html.split('data-testid="delta-ended">')[1].split("</span>")[0]
    assert ended.startswith("reverted by <code>user:ada</code>") and "approved by" not in ended


def test_the_delta_page_has_one_h1_and_approves_and_rejects(reviewer_client, agent):
    from memory.models import SkillDelta

    delta = propose(agent, "Escalate anything from the CFO after 48 hours, not 72.")
    html = without_ws(reviewer_client.get(f"/deltas/{delta.pk}/").content.decode())
    assert html.count("<h1") == 1
    assert f'action="/deltas/staged/{delta.pk}/approve/"' in html
    assert f'action="/deltas/staged/{delta.pk}/reject/"' in html
    response = reviewer_client.post(
        f"/deltas/staged/{delta.pk}/approve/", {"reason": "fine", "back": "detail"}
    )
    assert (
        response.status_code == 303 and without_ws(response["Location"]) == f"/deltas/{delta.pk}/"
    )
    assert SkillDelta.objects.get(pk=delta.pk).status == "active"


def test_a_viewer_sees_no_decision_forms_on_the_delta_page(viewer, agent):
    delta = propose(agent)
    html = viewer.get(f"/deltas/{delta.pk}/").content.decode()
    assert 'data-testid="detail-actions"' not in html
