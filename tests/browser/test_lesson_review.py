"""A reviewer works on lessons in a real browser: retire and restore with a reason, edit,
filter the list and settle a contradiction, all without a full page reload."""

import pytest
from playwright.sync_api import expect

from memory.models import AuditEvent, Lesson, LessonState, ReviewItem
from tests.browser.conftest import at, url_is
from tests.factories.lessons import LessonFactory
from tests.factories.review import LessonEvidenceFactory, OutcomeFactory, ReviewItemFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lesson(workspace):
    lesson = LessonFactory(
        workspace=workspace, text="Prefer uv:pip-install over pip:install for requirements.txt."
    )
    LessonEvidenceFactory(lesson=lesson, outcome=OutcomeFactory(workspace=workspace))
    return lesson


def confirm(page, scope, button: str, reason: str):
    """Open a confirm-with-reason disclosure in ``scope``, give the reason, submit."""
    summary = scope.locator("summary", has_text=button)
    if not summary.evaluate("s => s.parentElement.open"):  # a refused form stays open
        summary.click()
    field = scope.get_by_label("Reason").filter(visible=True)
    field.fill(reason)
    field.press("Enter")


def test_a_reviewer_retires_and_restores_a_lesson_in_place(login, live_server, workspace, lesson):
    page = login(workspace=workspace, role="reviewer")
    page.click("#nav >> text=Lessons")
    page.wait_for_url(at(live_server.url, "/lessons/"))
    page.get_by_role("link", name=lesson.text).click()
    page.wait_for_url(f"{live_server.url}/lessons/{lesson.pk}/?ws={workspace.name}")
    page.evaluate("window.__cairnMarker = 'same page'")  # survives only without a reload
    main = page.locator("#lesson-main")
    state = page.get_by_test_id("lesson-state")
    expect(state).to_have_text("active")

    # An empty reason is refused in place, and nothing changes.
    main.locator("summary", has_text="Retire…").click()
    main.get_by_label("Reason").filter(visible=True).fill("   ")  # passes `required` only
    main.get_by_role("button", name="Retire lesson").click()
    expect(main.locator(".confirm .error")).to_contain_text("Say why")
    expect(state).to_have_text("active")

    confirm(page, main, "Retire…", "wrong since the CI image changed")
    expect(state).to_have_text("retired")
    expect(page.get_by_test_id("retired-by")).to_contain_text("by person")
    expect(page.locator("#toasts")).to_contain_text("retired")
    history = page.locator("#history")
    expect(history).to_contain_text("Retired by person: “wrong since the CI image changed”")
    expect(page.locator("#activity")).to_contain_text("lesson.retire")
    expect(page.locator("#activity li").first).to_contain_text("wrong since the CI image changed")

    confirm(page, main, "Restore…", "it was right after all")
    expect(state).to_have_text("active")
    expect(page.locator("#activity li").first).to_contain_text("lesson.restore")
    expect(page.locator("#activity li").first).to_contain_text("it was right after all")
    expect(main.locator("summary", has_text="Retire…")).to_be_visible()

    assert page.evaluate("window.__cairnMarker") == "same page"
    lesson.refresh_from_db()
    assert lesson.state == LessonState.ACTIVE
    actions = list(
        AuditEvent.objects.filter(target_type="lesson", target_id=str(lesson.pk))
        .order_by("id")
        .values_list("action", "reason")
    )
    assert actions == [
        ("lesson.retire", "wrong since the CI image changed"),
        ("lesson.restore", "it was right after all"),
    ]


def test_an_edit_shows_the_new_version_and_keeps_the_old_in_history(
    login, live_server, workspace, lesson
):
    page = login(workspace=workspace, role="reviewer")
    page.goto(f"{live_server.url}/lessons/{lesson.pk}/")
    page.evaluate("window.__cairnMarker = 'same page'")
    main = page.locator("#lesson-main")
    main.locator("summary", has_text="Edit…").click()
    main.get_by_label("Lesson").fill("Install requirements with uv pip install, not pip.")
    main.get_by_label("Reason").filter(visible=True).fill("clearer")
    main.get_by_role("button", name="Save new version").click()
    expect(page.locator("#lesson-title")).to_have_text(
        "Install requirements with uv pip install, not pip."
    )
    edited = Lesson.objects.get(workspace=workspace, superseded_by__isnull=True)
    page.wait_for_url(at(live_server.url, f"/lessons/{edited.pk}/"))  # the URL names the new row
    expect(page.locator(f"#version-{lesson.pk}")).to_contain_text(f"edited → #{edited.pk}")
    expect(page.locator(f"#version-{edited.pk}")).to_contain_text("current")
    assert page.evaluate("window.__cairnMarker") == "same page"


def test_pin_and_seal_change_the_badges_in_place(login, live_server, workspace, lesson):
    page = login(workspace=workspace, role="reviewer")
    page.goto(f"{live_server.url}/lessons/{lesson.pk}/")
    page.evaluate("window.__cairnMarker = 'same page'")
    main = page.locator("#lesson-main")
    confirm(page, main, "Pin…", "release critical")
    expect(page.locator("#lesson-badges .badge.pinned")).to_be_visible()
    confirm(page, main, "Seal…", "checked by hand")
    expect(page.locator("#lesson-badges .badge.sealed")).to_be_visible()
    expect(main.locator("summary", has_text="Unseal…")).to_be_visible()
    assert page.evaluate("window.__cairnMarker") == "same page"
    lesson.refresh_from_db()
    assert lesson.pinned and lesson.sealed


def test_a_viewer_sees_no_actions(login, live_server, workspace, lesson):
    page = login(workspace=workspace, role="viewer")
    page.goto(f"{live_server.url}/lessons/{lesson.pk}/")
    expect(page.get_by_test_id("lesson-state")).to_have_text("active")
    expect(page.locator("#lesson-main summary")).to_have_count(0)


def test_lesson_filters_update_the_list_and_the_url(login, live_server, workspace, lesson):
    other = LessonFactory(
        workspace=workspace, text="Run npm ci before npm test.", operation_key="npm:ci"
    )
    page = login(workspace=workspace, role="viewer")
    page.goto(f"{live_server.url}/lessons/")
    page.evaluate("window.__cairnMarker = 'same page'")
    page.fill("#lesson-q", "npm")
    page.wait_for_url(url_is(live_server.url, "/lessons/", {"q": "npm"}, exact=False))
    expect(page.locator(f"#lesson-{other.pk}")).to_be_visible()
    expect(page.locator(f"#lesson-{lesson.pk}")).to_have_count(0)
    page.select_option("#lesson-state", "retired")
    expect(page.locator("#rows")).to_contain_text("No lessons match these filters.")
    assert page.evaluate("window.__cairnMarker") == "same page"


def test_a_reviewer_settles_a_contradiction_and_the_counter_drops(login, live_server, workspace):
    a = LessonFactory(workspace=workspace, text="Use docker compose v2 for services.")
    b = LessonFactory(workspace=workspace, text="Use docker-compose v1 for services.", sealed=True)
    item = ReviewItemFactory(workspace=workspace, a_id=a.pk, b_id=b.pk)
    page = login(workspace=workspace, role="reviewer")
    expect(page.locator("#nav-contradictions")).to_have_text("1")
    page.click("#nav >> text=Contradictions")
    page.wait_for_url(at(live_server.url, "/contradictions/"))
    page.evaluate("window.__cairnMarker = 'same page'")
    card = page.locator(f"#item-{item.pk}")
    confirm(page, card, "Keep A…", "CI runs compose v2")
    expect(card).to_contain_text("Resolved: kept A, retired B")
    expect(page.locator("#nav-contradictions")).to_have_text("0")
    assert page.evaluate("window.__cairnMarker") == "same page"
    b.refresh_from_db()
    assert b.state == LessonState.RETIRED
    assert ReviewItem.objects.get(pk=item.pk).resolved_reason == "CI runs compose v2"


def test_an_outcome_page_explains_its_verdict(login, live_server, workspace, lesson):
    outcome = lesson.evidence.get().outcome
    page = login(workspace=workspace, role="viewer")
    page.goto(f"{live_server.url}/lessons/{lesson.pk}/")
    page.locator("table.evidence").get_by_role("link", name=f"#{outcome.pk}").click()
    page.wait_for_url(f"{live_server.url}/outcomes/{outcome.pk}/?ws={workspace.name}")
    expect(page.get_by_test_id("why")).to_contain_text(
        "Passed: latest pytest run exited 0 at step 2; no step edited anything."
    )
