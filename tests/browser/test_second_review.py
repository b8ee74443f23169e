"""The traps a second reviewer found, walked in Chromium at 1280 and 360 px: a hint that
would reset a password, a proposal staged twice, a toast that outlives its job, dashboard
numbers that open other rows than they count, and a Decided filter the docs promise.

(The decided diff kept after the skill moves on, the reason kept through a login and the
phone header and approve form are walked in test_reviewer_desk_links.py at both widths.)
"""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import expect

from memory.core.actors import Actor
from memory.lessons.lifecycle import lesson_edit, lesson_restore, lesson_retire
from memory.models import AuditEvent, JobRun, Lesson
from tests.browser.conftest import at
from tests.factories.core import JobRunFactory
from tests.factories.identity import person_actor
from tests.factories.knowledge import KnowledgeFactory
from tests.factories.lessons import LessonFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=[1280, 360])
def width(request, page):
    page.set_viewport_size({"width": request.param, "height": 800})
    return request.param


def fits(page, locator, width):
    box = locator.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, box
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_the_import_hint_names_a_new_workspace_and_running_it_keeps_the_password(
    browser, login, live_server, workspace, width
):
    KnowledgeFactory(workspace=workspace)  # not empty: the import hint shows
    page = login(workspace=workspace, role="admin", username="ada")
    page.goto(f"{live_server.url}/exports/")
    hint = page.get_by_test_id("import-not-empty")
    expect(hint).to_contain_text("create_user NEW_WORKSPACE ada admin --create-workspace")
    expect(hint).to_contain_text("leaves your password alone")
    fits(page, hint, width)
    # Run as written (a new workspace's name in place of NEW_WORKSPACE): ada stays
    # logged in, her password still works, and the new workspace is hers.
    out, err = StringIO(), StringIO()
    call_command(
        "create_user",
        f"fresh-{width}",
        "ada",
        "admin",
        "--create-workspace",
        stdout=out,
        stderr=err,
    )
    assert "password is unchanged" in err.getvalue() + out.getvalue()
    page.reload()
    assert "/login/" not in page.url
    expect(page.locator("#ws")).to_contain_text(f"fresh-{width}")
    other = browser.new_context(viewport={"width": width, "height": 800})
    them = other.new_page()
    them.goto(f"{live_server.url}/login/")
    expect(them.locator("body")).to_contain_text("--reset-password")
    them.fill("#id_username", "ada")
    them.fill("#id_password", "pw-browser-1")
    them.click("button[type=submit]")
    them.wait_for_url(lambda url: "/login/" not in url)  # wherever login lands
    assert "/login/" not in them.url
    other.close()


def test_an_mcp_proposal_made_twice_is_one_card_with_its_reason_and_count(
    login, live_server, workspace, width
):
    import os

    from cairn_client import Cairn
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from memory.identity.services import token_issue
    from tests.clients.conftest import run_async, script
    from tests.factories.skills import learning_agent

    agent = learning_agent(workspace, name="gaia/chat")
    raw = token_issue(agent=agent, scope="agent").raw
    Cairn(url=live_server.url, token=token_issue(agent=agent, scope="harness").raw).store_turn(
        "s-mail",
        role="user",
        content="From now on escalate anything from the CFO after 48 hours.",
        turn_index=3,
    )
    proposal = {
        "skill": "triage-inbox",
        "kind": "preference",
        "section": "escalation",
        "payload": {"body": "Escalate anything from the CFO after 48 hours."},  # an object
        "rationale": "The user asked for it in turn 3.",
        "turns": ["s-mail#3"],
    }

    async def run():
        env = {**os.environ, "CAIRN_URL": live_server.url, "CAIRN_TOKEN": raw}
        params = StdioServerParameters(command=script("cairn-mcp"), args=[], env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                first = await session.call_tool("propose_delta", proposal)
                again = await session.call_tool("propose_delta", proposal)
                return first, again

    first, again = run_async(run())
    assert not first.isError and not again.isError, first.content[0].text
    assert "proposed 2 times" in again.content[0].text

    page = login(workspace=workspace, role="reviewer")
    page.goto(f"{live_server.url}/deltas/staged/")
    cards = page.locator("article.delta")
    expect(cards).to_have_count(1)
    pk = cards.first.get_attribute("id").removeprefix("delta-")
    expect(page.get_by_test_id(f"rationale-{pk}")).to_contain_text("The user asked for it")
    expect(page.get_by_test_id(f"proposals-{pk}")).to_have_text("proposed 2 times")
    fits(page, page.get_by_test_id(f"proposals-{pk}"), width)


def _learned(workspace, text: str, days_ago: int = 0) -> Lesson:
    lesson = LessonFactory(workspace=workspace, text=text, normalized_text=text.lower())
    event = AuditEvent.objects.create(
        workspace=workspace, actor="system:outcomes", action="lesson.learn",
        target_type="lesson", target_id=str(lesson.pk),
    )  # fmt: skip
    when = timezone.now() - timedelta(days=days_ago)
    AuditEvent.objects.filter(pk=event.pk).update(created_at=when)
    return lesson


def _rows_behind(page, live_server, testid: str, rows: str) -> tuple[int, int]:
    """Click a dashboard number's link: (the number, the rows the link shows)."""
    page.goto(f"{live_server.url}/dashboard/")
    number = int(page.get_by_test_id(testid).inner_text().strip("+−"))
    page.get_by_test_id(testid).click()
    page.wait_for_url(lambda url: "?" in url)
    return number, page.locator(rows).count()


def test_every_dashboard_number_opens_the_rows_it_counts(login, live_server, workspace, width):
    _learned(workspace, "Run pytest from the root.")
    edited = _learned(workspace, "Pin the lockfile.", days_ago=3)
    lesson_edit(
        lesson=edited, actor=person_actor("ada"), text="Pin the lockfile first.", reason="clearer"
    )
    _learned(workspace, "Long ago.", days_ago=45)
    retired = _learned(workspace, "Retire me.")
    lesson_retire(lesson=retired, actor=person_actor("ada"), reason="wrong")
    back = LessonFactory(workspace=workspace, text="Back.", normalized_text="back")
    lesson_retire(lesson=back, actor=person_actor("ada"), reason="wrong")
    lesson_restore(
        lesson=Lesson.objects.get(pk=back.pk), actor=person_actor("ada"), reason="right after all"
    )
    # Oldest first, as real runs are inserted (ids grow with created_at).
    old = JobRunFactory(workspace=workspace, status="failed", error="old")
    JobRun.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=30))
    for status in ("queued", "running", "succeeded"):
        JobRunFactory(workspace=workspace, status=status)
    JobRunFactory(workspace=workspace, status="failed", error="boom")

    page = login(workspace=workspace, role="viewer")
    lessons = "table.lessons tbody tr"
    assert _rows_behind(page, live_server, "learned-count", lessons) == (3, 3)
    expect(page.locator("#lesson-changed")).to_have_value("learned")
    assert _rows_behind(page, live_server, "retired-count", lessons) == (1, 1)
    expect(page.locator(f"#lesson-{retired.pk}")).to_be_visible()
    jobs = "table.jobs tbody tr"
    page.goto(f"{live_server.url}/dashboard/")
    active = int(page.get_by_test_id("active-jobs-count").inner_text())
    page.get_by_test_id("active-jobs-link").click()
    page.wait_for_url(lambda url: "/jobs/?status=active" in url)  # and its ws
    assert active == page.locator(jobs).count() == 2
    page.goto(f"{live_server.url}/dashboard/")
    failed = int(page.get_by_test_id("failed-runs-count").inner_text())
    page.get_by_test_id("failed-runs-link").click()
    page.wait_for_url(lambda url: "/jobs/?status=failed&since=" in url)
    assert failed == page.locator(jobs).count() == 1
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_toasts_end_with_their_job_and_the_receipt_wraps(
    login, live_server, workspace, celery_worker_process, width
):
    from tests.factories.privacy import bundle, ready_agent, workspace_ready

    workspace_ready(workspace)
    bundle(agent=ready_agent(workspace, "gaia/chat"), name="sarah", entity="person:sarah_chen")
    page = login(workspace=workspace, role="admin")

    # Run now: "queued" while it is, then how it ended; never "queued" after.
    page.goto(f"{live_server.url}/jobs/")
    page.get_by_test_id("run-decay").click()
    expect(page.locator("#toasts")).to_contain_text("decay queued as run #")
    run = JobRun.objects.get(kind="decay")
    ended = page.get_by_test_id("toast-ended")
    expect(ended).to_contain_text(f"decay run #{run.pk} finished.", timeout=30000)
    expect(page.locator("#toasts .toast", has_text="queued")).to_have_count(0)

    # An erasure: its receipt page does not keep a "queued" toast once it is done.
    page.goto(f"{live_server.url}/erasures/")
    page.select_option("#erasure-kind", "entity")
    page.fill("#erasure-value", "person:sarah_chen")
    page.get_by_role("button", name="Preview what goes").click()
    page.fill("#erase-reason", "deletion request 42")
    page.fill("#erase-confirm", workspace.name)
    page.get_by_role("button", name="for good").click()
    page.wait_for_url(at(live_server.url, "/erasures/*/"))
    expect(page.get_by_test_id("erasure-status")).to_have_text("completed", timeout=60000)
    expect(page.locator("#toasts .toast", has_text="queued")).to_have_count(0, timeout=10000)
    fits(page, page.get_by_test_id("receipt-digest"), width)


def test_decided_pages_filter_by_agent_as_the_docs_say(login, live_server, workspace, width):
    from memory.skills.consent import delta_approve
    from tests.factories.skills import learning_agent, propose
    from tests.factories.skills import reviewer as make_reviewer

    first = propose(learning_agent(workspace, name="gaia/chat"), "Escalate after 48 hours.")
    second = propose(
        learning_agent(workspace, name="hermes/mail", register=False),
        "Keep replies short.",
        section="drafting-replies",
    )
    person = Actor.for_user(make_reviewer(workspace, username="ann"))
    for delta in (first, second):
        delta_approve(delta=delta, actor=person, reason="fine")
    page = login(workspace=workspace, role="reviewer")
    page.goto(f"{live_server.url}/deltas/staged/decided/")
    rows = page.locator("table.decided tbody tr")
    expect(rows).to_have_count(2)
    page.select_option("#decided-agent", label="hermes/mail")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(f"#{second.pk}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
