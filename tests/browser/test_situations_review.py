"""A reviewer sees a blocked turn's cost on its outcome page and removes a known
blocker in a real browser, without a full page reload."""

import pytest
from playwright.sync_api import expect

from memory.models import AuditEvent, SituationLesson
from tests.browser.conftest import at
from tests.factories.identity import AgentFactory
from tests.factories.situations import SituationLessonFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reviewer_removes_a_known_blocker_in_place(login, live_server, workspace):
    agent = AgentFactory(workspace=workspace)
    lesson = SituationLessonFactory(agent=agent)
    page = login(workspace=workspace, role="reviewer")
    page.click("#nav >> text=Known blockers")
    page.wait_for_url(at(live_server.url, "/situations/"))
    page.evaluate("window.__cairnMarker = 'same page'")
    card = page.locator(f"#blocker-{lesson.pk}")
    expect(card).to_contain_text("gh auth login")
    card.locator("summary", has_text="Remove…").click()
    field = card.get_by_label("Reason").filter(visible=True)
    field.fill("signed in by hand")
    field.press("Enter")
    expect(page.locator(f"#blocker-{lesson.pk}")).to_contain_text("removed")
    expect(page.locator("#toasts")).to_contain_text("no longer a known blocker")
    assert page.evaluate("window.__cairnMarker") == "same page"
    assert SituationLesson.objects.get(pk=lesson.pk).state == "removed"
    assert AuditEvent.objects.filter(action="situation_lesson.remove").count() == 1
