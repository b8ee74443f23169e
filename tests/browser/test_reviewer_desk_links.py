"""The reviewer's desk, second pass, in a real browser at 1280 and 360 px: the delta in
its own section in both diff views, the decided diff kept, links that name their
workspace, live counters, outcome channels, stale orphans one by one, and a phone
header and approve form that stay out of the way."""

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from memory.core.actors import Actor
from memory.skills.consent import delta_approve
from tests.browser.conftest import at, url_is
from tests.factories.identity import WorkspaceFactory
from tests.factories.review import OutcomeFactory
from tests.factories.skills import learning_agent, propose, register_v2
from tests.factories.skills import reviewer as make_reviewer

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = [1280, 360]


@pytest.fixture(params=WIDTHS)
def width(request, page):
    page.set_viewport_size({"width": request.param, "height": 800})
    return request.param


def test_a_delta_sits_in_its_section_in_both_views_and_its_decision_keeps_that_diff(
    login, live_server, workspace, width
):
    agent = learning_agent(workspace, name="gaia/chat")
    delta = propose(agent, "Escalate anything from the CFO after 48 hours, not 72.")
    page = login(workspace=workspace, role="reviewer")
    page.goto(f"{live_server.url}/deltas/{delta.pk}/")
    expect(page.locator("h1")).to_have_count(1)
    card = page.locator(f"#delta-{delta.pk}")
    unified = card.locator(".diff .unified")
    expect(unified.locator(".hunk-section").first).to_have_text("## Escalation")
    rows = unified.locator(".dl").all_inner_texts()
    learned = next(i for i, t in enumerate(rows) if "after 48 hours, not 72" in t)
    assert "without a reply." in rows[learned - 1]  # the section's own last line above it
    assert not any("Learned adjustments" in t for t in rows)
    card.locator(".split-toggle").check()
    expect(card.locator(".diff .split .hunk-section").first).to_have_text("## Escalation")
    expect(card.locator(".diff .split .tx.add")).to_contain_text("after 48 hours, not 72")

    # Approve from the delta's own page; the skill then moves on.
    page.locator("[data-testid=detail-actions] summary", has_text="Approve").click()
    page.locator("[data-testid=detail-actions] details[open] input[name=reason]").fill("as asked")
    page.get_by_role("button", name="Approve delta").click()
    page.wait_for_url(at(live_server.url, f"/deltas/{delta.pk}/"))
    expect(page.get_by_test_id("delta-status")).to_have_text("active")
    register_v2(workspace)
    page.reload()
    decided = page.get_by_test_id("decided-diff")
    expect(decided).to_contain_text("1.0.0")
    expect(decided.locator(".hunk-section").first).to_have_text("## Escalation")
    expect(page.get_by_test_id("moved-on")).to_contain_text("The skill has moved on since")
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_a_link_to_another_workspace_switches_with_a_banner_and_survives_login(
    browser, live_server, workspace, width
):
    from memory.identity.services import user_create

    other = WorkspaceFactory(name="team-b")
    user_create(workspace=workspace, username="ada", role="reviewer", password="pw-browser-1")
    user_create(workspace=other, username="ada", role="reviewer")
    delta = propose(learning_agent(other, name="gaia/chat"), "Escalate after 48 hours.")
    secret = propose(learning_agent(WorkspaceFactory(name="secret"), name="x"), "Hidden.")
    context = browser.new_context(viewport={"width": width, "height": 800})
    page = context.new_page()
    # Logged out: the link goes through the login form and comes back to itself.
    page.goto(f"{live_server.url}/deltas/{delta.pk}/?ws=team-b")
    page.fill("#id_username", "ada")
    page.fill("#id_password", "pw-browser-1")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/deltas/{delta.pk}/?ws=team-b")
    expect(page.locator(f"#delta-{delta.pk}")).to_be_visible()
    # Back in the first workspace, the same link switches again, with a banner.
    page.select_option("#ws", str(workspace.pk))
    page.wait_for_url(at(live_server.url, "/dashboard/"))
    page.goto(f"{live_server.url}/deltas/{delta.pk}/?ws=team-b")
    expect(page.get_by_test_id("workspace-switched")).to_contain_text("team-b")
    expect(page.get_by_test_id("workspace-switched")).to_contain_text(workspace.name)
    expect(page.locator(f"#delta-{delta.pk}")).to_be_visible()
    # A workspace ada is not in stays a 404.
    response = page.goto(f"{live_server.url}/deltas/{secret.pk}/?ws=secret")
    assert response.status == 404
    context.close()


def test_counters_follow_actions_and_refresh_while_the_page_is_open(
    login, live_server, workspace, settings, width
):
    settings.CAIRN_UI_COUNTS_POLL_S = 1
    agent = learning_agent(workspace, name="gaia/chat")
    first = propose(agent, "Escalate after 48 hours.")
    propose(agent, "Keep replies short.", section="drafting-replies")
    page = login(workspace=workspace, role="reviewer")
    page.goto(f"{live_server.url}/deltas/staged/")
    expect(page.locator("#queue-total-staged")).to_have_text("2")
    card = page.locator(f"#delta-{first.pk}")
    card.locator("summary", has_text="Approve").click()
    card.locator("details[open] input[name=reason]").fill("fine")
    card.get_by_role("button", name="Approve delta").click()
    expect(page.locator(f"#delta-{first.pk}")).to_have_count(0)
    expect(page.locator("#queue-total-staged")).to_have_text("1")
    expect(page.locator("#nav-staged")).to_have_text("1")
    # A delta arriving while the dashboard is open shows up without a reload.
    page.goto(f"{live_server.url}/dashboard/")
    expect(page.locator("#dash-staged")).to_have_text("1")
    propose(agent, "Sign with a first name.", section="drafting-replies")
    expect(page.locator("#dash-staged")).to_have_text("2", timeout=10000)
    expect(page.locator("#nav-staged")).to_have_text("2")


def test_outcomes_say_who_reported_them_and_filter_by_it(login, live_server, workspace, width):
    from tests.factories.identity import AgentFactory

    agent = AgentFactory(workspace=workspace)
    harness = OutcomeFactory(workspace=workspace, agent=agent, channel="harness")
    told = OutcomeFactory(workspace=workspace, agent=agent, channel="agent")
    page = login(workspace=workspace, role="viewer")
    page.goto(f"{live_server.url}/outcomes/")
    expect(page.get_by_test_id(f"channel-{told.pk}")).to_contain_text("self-report")
    page.select_option("#outcome-channel", "harness")
    expect(page.locator(f"#outcome-{told.pk}")).to_have_count(0)
    expect(page.locator(f"#outcome-{harness.pk}")).to_be_visible()
    page.goto(f"{live_server.url}/outcomes/{told.pk}/")
    expect(page.get_by_test_id("self-report")).to_be_visible()


def test_a_stale_orphan_is_reapproved_on_its_own(login, live_server, workspace, width):
    agent = learning_agent(workspace, name="gaia/chat")
    person = Actor.for_user(make_reviewer(workspace, username="ann"))
    stale = propose(agent, "Escalate CFO threads after 48 hours.")
    same = propose(agent, "Keep replies short.", section="drafting-replies")
    for delta in (stale, same):
        delta_approve(delta=delta, actor=person, reason="ok")
    register_v2(workspace)
    page = login(workspace=workspace, role="reviewer")
    page.goto(f"{live_server.url}/deltas/orphans/")
    expect(page.locator(f"#delta-{same.pk} input[name=ids]")).to_have_count(1)
    expect(page.locator(f"#delta-{stale.pk} input[name=ids]")).to_have_count(0)
    card = page.locator(f"#delta-{stale.pk}")
    card.locator("summary", has_text="Re-approve").click()
    card.locator("details[open] input[name=reason]").fill("read against the new text")
    card.get_by_role("button", name="Re-approve delta").click()
    expect(page.locator(f"#delta-{stale.pk}")).to_have_count(0)


def test_on_a_phone_the_header_folds_and_the_approve_form_never_covers_its_card(
    login, live_server, workspace, width
):
    agent = learning_agent(workspace, name="gaia/chat")
    for n in range(3):
        propose(agent, f"Rule number {n} for escalations.")
    page = login(workspace=workspace, role="reviewer")
    page.goto(f"{live_server.url}/deltas/staged/")
    header = page.locator("header.topbar").bounding_box()
    assert header["height"] < 140, header
    if width < 600:  # a phone: the nav folds behind Menu
        expect(page.locator("#nav-staged")).to_be_hidden()
        page.get_by_role("button", name="Menu").click()
        expect(page.locator("#nav-staged")).to_be_visible()
        page.get_by_role("button", name="Menu").click()
    else:  # a desk: the nav is open and there is no Menu button
        expect(page.locator("#nav-staged")).to_be_visible()
        expect(page.get_by_role("button", name="Menu")).to_be_hidden()
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("a")
    card = page.locator("article.delta.current")
    title = card.locator("h2").bounding_box()
    # Nothing covers the card's title: the element at its centre is inside the title.
    covered = page.evaluate(
        """([x, y]) => { const e = document.elementFromPoint(x, y);
             return !(e && e.closest('article.delta.current h2')); }""",
        [title["x"] + title["width"] / 2, title["y"] + title["height"] / 2],
    )
    assert not covered
    form = card.locator("details[open] .confirm-form").bounding_box()
    assert form["x"] >= 0 and form["x"] + form["width"] <= width + 1


def test_a_typed_reason_survives_a_login_redirect(login, live_server, workspace, width):
    agent = learning_agent(workspace, name="gaia/chat")
    delta = propose(agent, "Escalate after 48 hours.")
    page = login(workspace=workspace, role="reviewer", username="rita")
    page.goto(f"{live_server.url}/deltas/staged/")
    card = page.locator(f"#delta-{delta.pk}")
    card.locator("summary", has_text="Approve").click()
    card.locator("details[open] input[name=reason]").fill("matches what the user said in turn 12")
    # The session ends while the person types (the CSRF cookie stays, as it does).
    kept = [c for c in page.context.cookies() if c["name"] != "sessionid"]
    page.context.clear_cookies()
    page.context.add_cookies(kept)
    card.get_by_role("button", name="Approve delta").click()
    page.wait_for_url(url_is(live_server.url, "/login/"))
    page.fill("#id_username", "rita")
    page.fill("#id_password", "pw-browser-1")
    page.click("button[type=submit]")
    page.wait_for_url(at(live_server.url, "/deltas/staged/"))
    reason = page.locator(f"#delta-{delta.pk} details[open] input[name=reason]")
    expect(reason).to_have_value("matches what the user said in turn 12")
    page.locator(f"#delta-{delta.pk}").get_by_role("button", name="Approve delta").click()
    expect(page.locator(f"#delta-{delta.pk}")).to_have_count(0)
    page.reload()
    expect(page.locator("body")).not_to_contain_text("matches what the user said")


def test_an_admin_adds_a_member_who_logs_in_with_the_one_time_password(
    browser, login, live_server, workspace, width
):
    page = login(workspace=workspace, role="admin")
    page.goto(f"{live_server.url}/members/")
    expect(page.locator("h1")).to_have_text("Members")
    page.fill("#member-username", "newbie")
    page.select_option("#member-role", "reviewer")
    page.get_by_role("button", name="Add", exact=True).click()
    password = page.get_by_test_id("one-time-password").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # The answer's address is the Members page's: a reload asks for the page again
    # (no "resubmit the form?", no second add), and the password is gone with it.
    assert urlsplit(page.url).path == "/members/"
    page.reload()
    expect(page.locator("h1")).to_have_text("Members")
    expect(page.get_by_test_id("one-time-password")).to_have_count(0)
    expect(page.locator("#member-error")).to_have_count(0)
    expect(page.locator("body")).to_contain_text("newbie")
    other = browser.new_context(viewport={"width": width, "height": 800})
    them = other.new_page()
    them.goto(f"{live_server.url}/login/")
    them.fill("#id_username", "newbie")
    them.fill("#id_password", password)
    them.click("button[type=submit]")
    them.wait_for_url(at(live_server.url, "/dashboard/"))
    expect(them.locator(".badge.role")).to_have_text("reviewer")
    other.close()


def test_prune_asks_before_it_deletes(login, live_server, workspace, width):
    from memory.models import JobRun

    page = login(workspace=workspace, role="admin")
    page.goto(f"{live_server.url}/jobs/")
    expect(page.get_by_test_id("describe-prune")).to_contain_text("for good")
    page.get_by_test_id("run-prune").click()
    box = page.locator("li", has=page.get_by_test_id("run-prune")).locator("input[name=confirm]")
    expect(box).to_be_visible()
    assert box.evaluate("e => e.required")  # the browser refuses the form without it
    assert not JobRun.objects.filter(kind="prune").exists()
    box.check()
    page.get_by_test_id("run-prune-confirm").click()
    expect(page.locator("#toasts")).to_contain_text("queued")
    assert JobRun.objects.filter(kind="prune").count() == 1
