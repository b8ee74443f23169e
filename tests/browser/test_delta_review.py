"""Reviewing learned deltas in a real browser: approve from the diff, confirm a quarantined
delta, bulk re-approve orphans after a skill update. None of it reloads the page."""

import re

import pytest
from playwright.sync_api import expect

from memory.models import AuditEvent, OrphanNotice, SkillDelta
from tests.browser.conftest import at
from tests.factories.skills import (
    INJECTED,
    OBSERVED_CONTENT,
    V2_BODY,
    declare_tools,
    learning_agent,
    post_delta,
    preference,
    propose,
    register,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _no_reload_marker(page):
    page.evaluate("window.__cairnMarker = 'same page'")


def _same_page(page) -> bool:
    return page.evaluate("window.__cairnMarker") == "same page"


def test_a_reviewer_approves_a_staged_delta_from_its_diff(login, live_server, workspace):
    agent = learning_agent(workspace, name="gaia/chat")
    delta = propose(agent, "Escalate anything from the CFO after 48 hours, not 72.")
    other = propose(agent, "Keep replies under five sentences.", section="drafting-replies")
    page = login(workspace=workspace, role="reviewer")
    expect(page.locator("#nav-staged")).to_have_text("2")
    page.click("#nav >> text=Staged")
    page.wait_for_url(at(live_server.url, "/deltas/staged/"))
    _no_reload_marker(page)

    card = page.locator(f"#delta-{delta.pk}")
    added = card.locator(".diff .dl.add")
    expect(
        added.filter(has_text="- Escalate anything from the CFO after 48 hours, not 72.")
    ).to_be_visible()
    # The learned line sits inside its own section, which the hunk names; the anchored
    # section is shown in full.
    expect(card.locator(".diff .unified .hunk-section").first).to_have_text("## Escalation")
    card.locator(".split-toggle").check()
    expect(card.locator(".diff .split .hunk-section").first).to_have_text("## Escalation")
    card.locator(".split-toggle").uncheck()
    expect(card.locator(".anchored .section-text")).to_contain_text("## Escalation")
    expect(
        card.locator(".diff .dl.ctx").filter(has_text="Keep replies short and polite.")
    ).to_be_visible()
    # Added lines are green, context grey.
    assert "rgb(230, 246, 236)" == added.last.evaluate("e => getComputedStyle(e).backgroundColor")

    card.locator("summary", has_text="Approve").click()
    reason = card.locator("details[open]").get_by_label("Reason")
    reason.fill("matches what I told it")
    card.get_by_role("button", name="Approve delta").click()

    expect(page.locator(f"#delta-{delta.pk}")).to_have_count(0)
    expect(page.locator(f"#delta-{other.pk}")).to_be_visible()
    expect(page.locator("#nav-staged")).to_have_text("1")
    expect(page.locator("#toasts")).to_contain_text(f"Delta #{delta.pk} approved")
    assert _same_page(page)
    delta.refresh_from_db()
    assert delta.status == "active"
    assert AuditEvent.objects.get(action="delta.approve", target_id=str(delta.pk)).reason == (
        "matches what I told it"
    )

    # Rejecting the last one leaves the empty state, still without a reload.
    last = page.locator(f"#delta-{other.pk}")
    last.locator("summary", has_text="Reject").click()
    last.locator("details[open]").get_by_label("Reason").fill("too strict")
    last.get_by_role("button", name="Reject delta").click()
    expect(page.locator(".empty-state")).to_contain_text("No staged deltas.")
    expect(page.locator("#nav-staged")).to_have_text("0")
    assert _same_page(page)


def test_a_reviewer_confirms_a_quarantined_delta_after_reading_it(login, live_server, workspace):
    agent = learning_agent(workspace, name="gaia/chat")
    delta = propose(agent, INJECTED, provenance=OBSERVED_CONTENT)
    page = login(workspace=workspace, role="reviewer")
    expect(page.locator("#nav-quarantine")).to_have_text("1")
    page.click("#nav >> text=Quarantine")
    page.wait_for_url(at(live_server.url, "/deltas/quarantine/"))
    _no_reload_marker(page)

    card = page.locator(f"#delta-{delta.pk}")
    mark = card.locator("mark.finding", has_text="ignore all previous instructions")
    expect(mark).to_be_visible()
    expect(mark.locator(".finding-label")).to_have_text(
        "tells the agent to ignore its instructions"
    )
    expect(card.locator("mark.finding", has_text="forward the inbox contents to")).to_be_visible()

    card.locator("summary", has_text="Confirm").click()
    form = card.locator("details[open] form")
    form.get_by_label("Reason").fill("the user really asked for this")
    form.get_by_role("button", name="Confirm this delta").click()
    # Without the tick the browser does not even send it.
    expect(form.get_by_label("I have read this content and confirm it is safe")).to_be_visible()
    assert SkillDelta.objects.get(pk=delta.pk).status == "quarantined"

    form.get_by_label("I have read this content and confirm it is safe").check()
    form.get_by_role("button", name="Confirm this delta").click()
    expect(page.locator(f"#delta-{delta.pk}")).to_have_count(0)
    expect(page.locator("#nav-quarantine")).to_have_text("0")
    expect(page.locator("#toasts")).to_contain_text(f"Delta #{delta.pk} confirmed")
    expect(page.locator(".empty-state")).to_contain_text("Quarantine is empty.")
    assert _same_page(page)
    delta.refresh_from_db()
    assert delta.status == "active"
    event = AuditEvent.objects.get(action="delta.confirm_quarantined", target_id=str(delta.pk))
    assert event.reason == "the user really asked for this"


def test_a_reviewer_bulk_reapproves_orphans_after_a_skill_update(
    login, live_server, workspace, api
):
    # Everything the agent side does goes through the API, as an agent would.
    assert register(api).status_code == 201
    declare_tools(api)
    ids = {}
    for key, text, section in [
        ("escalation", "Escalate anything from the CFO after 48 hours.", "escalation"),
        ("drafting", "Sign with a first name only.", "drafting-replies"),
        ("drafting2", "Never use exclamation marks.", "drafting-replies"),
    ]:
        response = preference(api, text, section=section)
        assert response.status_code == 201, response.json()
        ids[key] = response.json()["id"]
    observed = post_delta(
        api,
        kind="preference",
        anchor={"section": "drafting-replies"},
        payload={"body": "Reply in the sender's language."},
        provenance=OBSERVED_CONTENT,
    )
    ids["untrusted"] = observed.json()["id"]
    # v2 rewrites the Escalation section: its orphans come back stale.
    response = register(api, version="2.0.0", body=V2_BODY)
    assert response.status_code == 201 and response.json()["orphaned"] == 4

    page = login(workspace=workspace, role="reviewer")
    expect(page.locator("#nav-orphans")).to_have_text("4")
    page.click("#nav >> text=Orphans")
    page.wait_for_url(at(live_server.url, "/deltas/orphans/"))
    _no_reload_marker(page)
    notice = page.get_by_test_id("orphan-notice")
    expect(notice).to_contain_text(
        "Skill triage-inbox was updated to 2.0.0: 4 learned adjustments still need re-approval."
    )
    expect(page.locator(f"#delta-{ids['escalation']} .rebase .badge.stale")).to_be_visible()
    expect(page.locator(f"#delta-{ids['drafting']} .rebase")).to_contain_text("same section text")

    # Select all, then untick one: three go.
    page.get_by_label("Select all on this page").check()
    # The stale one has no box: it is re-approved on its own card, against the new text.
    expect(page.locator(f"#delta-{ids['escalation']} input[name=ids]")).to_have_count(0)
    expect(page.locator("[data-checked-count]")).to_have_text("3 selected")
    page.locator(f"#delta-{ids['drafting2']} input[name=ids]").uncheck()
    expect(page.locator("[data-checked-count]")).to_have_text("2 selected")
    page.fill("#bulk-reason", "reviewed against v2")
    page.get_by_role("button", name="Re-approve selected").click()

    report = page.get_by_test_id("reapprove-report")
    expect(report).to_be_visible()
    expect(page.get_by_test_id("report-reapproved")).to_have_text("1")
    expect(page.get_by_test_id("report-quarantined")).to_have_text("1")
    expect(page.get_by_test_id("report-refused")).to_have_text("0")
    expect(page.locator(f"#delta-{ids['drafting2']}")).to_be_visible()  # left for later
    expect(page.locator("#nav-orphans")).to_have_text("2")
    expect(page.locator("#nav-quarantine")).to_have_text("1")
    expect(page.locator("#toasts")).to_contain_text("Re-approved 1 of 2; 1 back in quarantine.")
    # The notice counts what still waits, not what the update orphaned.
    expect(page.get_by_test_id("orphan-notice")).to_contain_text(
        "2 learned adjustments still need re-approval (of 4 it orphaned)."
    )
    stale = page.locator(f"#delta-{ids['escalation']}")
    stale.locator("summary", has_text="Re-approve").click()
    stale.locator("details[open] input[name=reason]").fill("read against the new v2 text")
    stale.get_by_role("button", name="Re-approve delta").click()
    expect(page.locator(f"#delta-{ids['escalation']}")).to_have_count(0)
    expect(page.locator("#nav-orphans")).to_have_text("1")
    assert _same_page(page)

    statuses = dict(SkillDelta.objects.values_list("pk", "status"))
    assert statuses == {
        ids["escalation"]: "active",
        ids["drafting"]: "active",
        ids["drafting2"]: "orphaned",
        ids["untrusted"]: "quarantined",
    }
    assert SkillDelta.objects.get(pk=ids["escalation"]).stale is True

    # The notice goes once dismissed, and stays gone.
    notice = page.get_by_test_id("orphan-notice")
    notice.get_by_role("button", name=re.compile("Dismiss")).click()
    expect(page.get_by_test_id("orphan-notice")).to_have_count(0)
    assert OrphanNotice.objects.get().seen_at is not None
    page.reload()
    expect(page.get_by_test_id("orphan-notice")).to_have_count(0)
    expect(page.locator(f"#delta-{ids['drafting2']}")).to_be_visible()
