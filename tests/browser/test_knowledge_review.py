"""A reviewer searches knowledge, then archives and restores an item, in a real browser."""

import re

import pytest
from playwright.sync_api import expect

from memory.models import AuditEvent
from tests.browser.conftest import at, url_is
from tests.factories.knowledge import KnowledgeFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_search_then_archive_and_restore_without_a_reload(login, live_server, workspace):
    host = KnowledgeFactory(workspace=workspace, content="The staging database host is db3.")
    KnowledgeFactory(workspace=workspace, content="Sarah prefers tea.", category="preference")
    page = login(workspace=workspace, role="reviewer")
    page.click("#nav >> text=Knowledge")
    page.wait_for_url(at(live_server.url, "/knowledge/"))
    page.evaluate("window.__cairnMarker = 'same page'")
    page.fill("#knowledge-q", "staging database")
    page.wait_for_url(
        url_is(live_server.url, "/knowledge/", {"q": "staging database"}, exact=False)
    )
    hit = page.locator(f"#knowledge-{host.pk}")
    expect(hit.locator("td.rank")).to_have_text("1")
    expect(page.locator("#rows .filter-note")).to_contain_text("does not count as a use")
    hit.get_by_role("link").click()
    page.wait_for_url(f"{live_server.url}/knowledge/{host.pk}/?ws={workspace.name}")
    page.evaluate("window.__cairnMarker = 'same page'")

    main = page.locator("#knowledge-main")
    status = page.get_by_test_id("knowledge-status")
    main.locator("summary", has_text="Archive…").click()
    reason = main.get_by_label("Reason").filter(visible=True)
    reason.fill("the host moved")
    reason.press("Enter")
    expect(status).to_have_text("archived")
    expect(page.locator("#activity li").first).to_contain_text("knowledge.archive")
    main.locator("summary", has_text="Restore…").click()
    reason = main.get_by_label("Reason").filter(visible=True)
    reason.fill("moved back")
    reason.press("Enter")
    expect(status).to_have_text("active")
    expect(page.locator("#activity li").first).to_contain_text("moved back")
    assert page.evaluate("window.__cairnMarker") == "same page"
    host.refresh_from_db()
    assert host.status == "active" and host.use_count == 0
    assert AuditEvent.objects.filter(target_type="knowledge", target_id=str(host.pk)).count() == 2


def test_show_sensitive_reveals_hidden_items(login, live_server, workspace):
    secret = KnowledgeFactory(workspace=workspace, content="Sarah is on leave.", sensitive=True)
    page = login(workspace=workspace, role="viewer")
    page.goto(f"{live_server.url}/knowledge/")
    expect(page.locator(f"#knowledge-{secret.pk}")).to_have_count(0)
    page.get_by_label("Show sensitive").check()
    page.wait_for_url(re.compile(r"sensitive=1"))
    expect(page.locator(f"#knowledge-{secret.pk} .badge.sensitive")).to_be_visible()
