"""An admin creates an agent, issues a token, sees it once and revokes it, in one page."""

import re

import pytest
from playwright.sync_api import expect

from memory.identity.services import token_digest
from memory.models import ApiToken, AuditEvent
from tests.browser.conftest import at, url_is
from tests.factories.identity import person_actor

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_manages_an_agent_and_its_token_without_a_reload(login, live_server, workspace):
    page = login(workspace=workspace, role="admin")
    page.click("#nav >> text=Agents & tokens")
    page.wait_for_url(at(live_server.url, "/agents/"))
    expect(page.locator(".empty-state")).to_contain_text("No agents yet.")
    # Survives only if nothing below reloads the page.
    page.evaluate("window.__cairnMarker = 'same page'")

    # Create an agent: type the name and press Enter.
    page.fill("#agent-name", "gaia/chat")
    page.press("#agent-name", "Enter")
    card = page.locator("section.agent", has_text="gaia/chat")
    expect(card).to_be_visible()
    expect(page.locator(".empty-state")).to_be_hidden()
    expect(page.locator("#toasts")).to_contain_text("gaia/chat created")
    expect(page.locator("#agent-name")).to_have_value("")  # a fresh form

    # Issue a token: the raw value is shown once, with a copy button.
    card.get_by_label("Token label").fill("laptop")
    card.get_by_role("button", name="Issue token").click()
    raw_input = card.locator("input.raw-token")
    expect(raw_input).to_be_visible()
    raw = raw_input.input_value()
    assert re.fullmatch(r"cairn_[0-9a-f]{8}_[A-Za-z0-9_-]+", raw)
    token = ApiToken.objects.get(agent__name="gaia/chat", agent__workspace=workspace)
    assert token.digest == token_digest(raw) and token.name == "laptop"
    card.get_by_role("button", name="Copy", exact=True).click()
    expect(card.get_by_role("button", name="Copied")).to_be_visible()
    expect(page.locator("#nav-active-tokens")).to_have_text("1")

    # Revoke it with a reason; the row and the nav counter change in place.
    row = page.locator(f"#token-{token.pk}")
    summary = row.locator("summary", has_text="Revoke")
    summary.click()
    reason = row.get_by_label("Reason")
    reason.focus()
    page.keyboard.press("Escape")  # changed my mind: the form closes, focus goes back
    expect(reason).to_be_hidden()
    expect(summary).to_be_focused()
    page.keyboard.press("Enter")  # and open it again from the keyboard
    expect(reason).to_be_visible()
    reason.fill("laptop lost")
    reason.press("Enter")
    expect(page.locator(f"#token-{token.pk}")).to_have_class(re.compile(r"\brevoked\b"))
    expect(page.locator(f"#token-{token.pk} .badge.revoked")).to_have_text("revoked")
    expect(page.locator("#nav-active-tokens")).to_have_text("0")
    expect(page.locator("#toasts")).to_contain_text("revoked")

    assert page.evaluate("window.__cairnMarker") == "same page"
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert AuditEvent.objects.get(action="token.revoke", target_id=str(token.pk)).reason == (
        "laptop lost"
    )

    # Shown once: a fresh load of the page no longer has it anywhere.
    page.reload()
    expect(page.locator("section.agent", has_text="gaia/chat")).to_be_visible()
    assert raw not in page.content()


def test_the_raw_token_never_enters_htmx_history(login, live_server, workspace):
    page = login(workspace=workspace, role="admin")
    page.goto(f"{live_server.url}/agents/")
    page.fill("#agent-name", "ci-bot")
    page.press("#agent-name", "Enter")
    card = page.locator("section.agent", has_text="ci-bot")
    card.get_by_role("button", name="Issue token").click()
    raw = card.locator("input.raw-token").input_value()
    # Filtering pushes a new URL; htmx snapshots the page into its history cache first
    # (sessionStorage in htmx 2.0.11), unless an element says hx-history="false".
    page.fill("#agent-q", "ci")
    page.wait_for_url(url_is(live_server.url, "/agents/", {"q": "ci"}))
    page.wait_for_function("sessionStorage.getItem('htmx-current-path-for-history') !== null")
    stored = page.evaluate(
        "JSON.stringify(Object.assign({}, sessionStorage)) + JSON.stringify(Object.assign({}, localStorage))"
    )
    assert raw not in stored


def test_an_empty_reason_is_refused_in_place(login, live_server, workspace):
    from memory.identity.services import agent_create, token_issue

    agent = agent_create(workspace=workspace, name="gaia/chat", actor=person_actor("test"))
    token = token_issue(agent=agent).token
    page = login(workspace=workspace, role="admin")
    page.goto(f"{live_server.url}/agents/")
    row = page.locator(f"#token-{token.pk}")
    row.locator("summary", has_text="Revoke").click()
    row.get_by_label("Reason").fill("   ")  # passes `required`, not the server's rule
    row.get_by_role("button", name="Revoke token").click()
    expect(page.locator(f"#token-{token.pk} .error")).to_contain_text("Say why")
    token.refresh_from_db()
    assert token.revoked_at is None
