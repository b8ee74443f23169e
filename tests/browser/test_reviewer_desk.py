"""The reviewer's desk in a real browser: read why, see the anchored section, approve
with the keyboard, land on the next card, and find the decision again."""

import pytest
from playwright.sync_api import expect

from memory.models import SkillDelta
from tests.factories.skills import cited_escalation_deltas

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reviewer_reads_why_approves_with_a_and_finds_it_under_decided(
    login, live_server, workspace
):
    first, second = cited_escalation_deltas(workspace)
    page = login(workspace=workspace, role="reviewer")

    # Open the delta from its permalink (what a webhook payload links to).
    page.goto(f"{live_server.url}/deltas/{first.pk}/")
    expect(page.get_by_text("The user corrected the escalation window in turn 12.")).to_be_visible()
    expect(page.locator(f"[data-testid=anchored-{first.pk}] .section-text")).to_contain_text(
        "Escalate a thread when it has been waiting longer"
    )
    # The cited conversation, with the cited turn highlighted.
    page.locator(".turns a", has_text="sess_91f3#12").click()
    expect(page.locator("#turn-12.cited")).to_contain_text("48 hours, not 72")
    expect(page.locator("#turn-11")).not_to_have_class("cited")

    # The queue: j focuses the first card, a opens its approve form.
    page.goto(f"{live_server.url}/deltas/staged/")
    page.keyboard.press("j")
    expect(page.locator(f"#delta-{first.pk}")).to_be_focused()
    page.keyboard.press("a")
    reason = page.locator(f"#delta-{first.pk} details[data-key-action=approve] input[name=reason]")
    expect(reason).to_be_focused()
    reason.fill("the user asked for it")
    reason.press("Enter")
    expect(page.locator(f"#delta-{first.pk}")).to_have_count(0)
    # Focus lands on the next card, not on <body>.
    expect(page.locator(f"#delta-{second.pk}")).to_be_focused()
    assert SkillDelta.objects.get(pk=first.pk).status == "active"

    # Side by side, on the remaining card.
    card = page.locator(f"#delta-{second.pk}")
    expect(card.locator(".diff .split")).to_be_hidden()
    card.locator("label.diff-switch").click()
    expect(card.locator(".diff .split")).to_be_visible()
    expect(card.locator(".diff .unified")).to_be_hidden()

    # Found again: under Decided, and on the delta's page with its history.
    page.goto(f"{live_server.url}/deltas/staged/decided/")
    row = page.locator("table.decided tbody tr").first
    expect(row).to_contain_text("approved")
    expect(row).to_contain_text("the user asked for it")
    row.locator(f'a[href="/deltas/{first.pk}/?ws={workspace.name}"]').click()
    expect(page.locator("[data-testid=delta-history]")).to_contain_text("Approved")
    expect(page.locator("[data-testid=delta-status]")).to_have_text("active")
