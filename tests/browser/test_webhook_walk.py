"""Issue 16's walk, from a webhook: a team's receiver gets "delta staged", a reviewer
opens the delta from the payload's link, reads why, approves with the keyboard,
lands on the next card, and finds the decision again; on a desktop and on a phone.

The webhook goes through the real broker and worker to a local receiver."""

import pytest
from playwright.sync_api import expect

from memory.models import SkillDelta
from memory.webhooks.signing import signature_verify
from tests.factories.skills import ESCALATION_RATIONALE, cited_escalation_deltas
from tests.factories.webhooks import Receiver, hook, receiver_start

pytestmark = pytest.mark.django_db(transaction=True)

RATIONALE = ESCALATION_RATIONALE


@pytest.fixture
def receiver():
    r = Receiver()
    server = receiver_start(r)
    yield r
    server.shutdown()


@pytest.mark.parametrize("width", [1280, 390])
def test_a_reviewer_walks_from_a_webhook_payload_to_the_decision(
    browser, live_server, workspace, receiver, celery_worker_process, settings, width
):
    settings.SITE_URL = live_server.url  # the links in payloads point at this server
    issued = hook(workspace, receiver)
    first, second = cited_escalation_deltas(workspace)

    # The team's endpoint got two signed "delta staged" messages; the first links to it.
    staged = receiver.wait_for(2, event="delta.staged")
    for got in staged:
        assert signature_verify(
            secret=issued.secret, body=got.body, header=got.headers["X-Cairn-Signature"]
        )
    (payload,) = [g.json["data"] for g in staged if g.json["data"]["delta"]["id"] == first.pk]
    assert payload["delta"]["url"] == f"{live_server.url}/deltas/{first.pk}/?ws={workspace.name}"

    from memory.identity.services import user_create

    user_create(workspace=workspace, username="rev", role="reviewer", password="pw-browser-1")
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15000)
    # Following the link while signed out goes through the login, then to the delta.
    page.goto(payload["delta"]["url"])
    page.fill("#id_username", "rev")
    page.fill("#id_password", "pw-browser-1")
    page.click("button[type=submit]")
    page.wait_for_url(payload["delta"]["url"])
    _no_overflow(page, width)

    # Why: the rationale first, the anchored section's own text, the cited conversation.
    expect(page.get_by_text(RATIONALE)).to_be_visible()
    expect(page.locator(f"[data-testid=anchored-{first.pk}] .section-text")).to_contain_text(
        "Escalate a thread when it has been waiting longer"
    )
    page.locator(".turns a", has_text="sess_91f3#12").click()
    expect(page.locator("#turn-12.cited")).to_contain_text("48 hours, not 72")
    expect(page.locator("#turn-11")).not_to_have_class("cited")
    _no_overflow(page, width)

    # The queue the payload names: j to the first card, a to approve, focus on the next.
    page.goto(payload["queue_url"])
    page.keyboard.press("j")
    expect(page.locator(f"#delta-{first.pk}")).to_be_focused()
    page.keyboard.press("a")
    reason = page.locator(f"#delta-{first.pk} details[data-key-action=approve] input[name=reason]")
    expect(reason).to_be_focused()
    expect(reason).to_be_in_viewport()
    reason.fill("the user asked for it")
    reason.press("Enter")
    expect(page.locator(f"#delta-{first.pk}")).to_have_count(0)
    expect(page.locator(f"#delta-{second.pk}")).to_be_focused()
    assert SkillDelta.objects.get(pk=first.pk).status == "active"

    # The decision goes out too: agents and the team learn it without polling.
    (decided,) = receiver.wait_for(1, event="delta.decided")
    assert decided.json["data"]["delta"]["id"] == first.pk
    assert decided.json["data"]["decision"] == "approved"
    assert decided.json["data"]["decided_by"] == "user:rev"

    # Found again: under Decided, and on the delta's own page with its history.
    page.goto(f"{live_server.url}/deltas/staged/decided/")
    row = page.locator("table.decided tbody tr").first
    expect(row).to_contain_text("approved")
    expect(row).to_contain_text("the user asked for it")
    _no_overflow(page, width)
    row.locator(f'a[href="/deltas/{first.pk}/?ws={workspace.name}"]').click()
    expect(page.locator("[data-testid=delta-history]")).to_contain_text("Approved")
    expect(page.locator("[data-testid=delta-status]")).to_have_text("active")
    _no_overflow(page, width)
    context.close()


def _no_overflow(page, width):
    overflow = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"{page.url} is {overflow}px wider than {width}px"
