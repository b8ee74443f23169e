"""Job runs, audit log and dashboard in a real browser: live progress, filters, keys."""

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from memory.models import AuditEvent, JobRun
from tests.browser.conftest import at
from tests.factories.core import AuditEventFactory, JobRunFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_running_job_updates_itself_until_it_ends(login, live_server, workspace):
    run = JobRunFactory(
        workspace=workspace,
        kind="reconcile",
        status="running",
        started_at=timezone.now(),
        progress_done=2,
        progress_total=10,
        counts={},
    )
    page = login(workspace=workspace, role="viewer")
    page.click("#nav >> text=Job runs")
    page.wait_for_url(at(live_server.url, "/jobs/"))
    page.evaluate("window.__cairnMarker = 'same page'")
    row = page.locator(f"#job-{run.pk}")
    expect(row).to_contain_text("2 / 10")
    expect(page.locator("#nav a[data-key=j] .count")).to_have_text("1")

    JobRun.objects.filter(pk=run.pk).update(progress_done=7)
    expect(row).to_contain_text("7 / 10", timeout=8000)
    expect(row.locator("progress")).to_have_attribute("value", "70")

    JobRun.objects.filter(pk=run.pk).update(
        status="succeeded", progress_done=10, finished_at=timezone.now(), counts={"pairs": 42}
    )
    expect(row.locator(".badge.succeeded")).to_be_visible(timeout=8000)
    expect(row).to_contain_text("pairs 42")
    expect(row).not_to_have_attribute("hx-trigger", re.compile(".*"))  # polling stopped
    assert page.evaluate("window.__cairnMarker") == "same page"


def test_job_filters_update_the_list_and_the_url(login, live_server, workspace):
    decay = JobRunFactory(workspace=workspace, kind="decay")
    failed = JobRunFactory(workspace=workspace, kind="prune", status="failed", error="boom")
    page = login(workspace=workspace, role="viewer")
    page.goto(f"{live_server.url}/jobs/")
    page.evaluate("window.__cairnMarker = 'same page'")
    page.select_option("#job-status", "failed")
    # The filter form carries its workspace (a ws field, and ws on its hx-get).
    page.wait_for_url(re.compile(r"/jobs/\?(ws=[^&]+&)*kind=&status=failed&since=$"))
    expect(page.locator(f"#job-{decay.pk}")).to_have_count(0)
    expect(page.locator(f"#job-{failed.pk}")).to_contain_text("boom")
    page.select_option("#job-kind", "decay")
    expect(page.locator("#rows")).to_contain_text("No job runs match these filters.")
    assert page.evaluate("window.__cairnMarker") == "same page"
    page.go_back()
    expect(page.locator(f"#job-{failed.pk}")).to_be_visible()


def test_the_audit_log_filters_and_pages_in_place(login, live_server, workspace):
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(workspace=workspace, actor="system:decay", action="knowledge.decay")
            for _ in range(60)
        ]
    )
    revoke = AuditEventFactory(
        workspace=workspace, actor="user:ann", action="token.revoke", reason="laptop lost"
    )
    page = login(workspace=workspace, role="viewer")
    page.goto(f"{live_server.url}/audit/")
    page.evaluate("window.__cairnMarker = 'same page'")
    expect(page.locator("#rows tbody tr")).to_have_count(50)
    page.click("text=Older →")
    page.wait_for_url(re.compile(r"/audit/\?after="))
    rest = AuditEvent.objects.filter(workspace=workspace).count() - 50  # incl. the login's own
    expect(page.locator("#rows tbody tr")).to_have_count(rest)
    page.fill("#audit-action", "token.rev")
    page.wait_for_url(re.compile(r"/audit/\?(ws=[^&]+&)*action=token.rev&actor=(&from=&to=)?$"))
    expect(page.locator("#rows tbody tr")).to_have_count(1)
    expect(page.locator(f"#audit-{revoke.pk}")).to_contain_text("laptop lost")
    assert page.evaluate("window.__cairnMarker") == "same page"


def test_the_dashboard_chart_and_keyboard_shortcuts(login, live_server, workspace):
    JobRunFactory(workspace=workspace, status="succeeded")
    JobRunFactory(workspace=workspace, status="failed")
    page = login(workspace=workspace, role="viewer")
    chart = page.locator("#chart-job-runs-per-day-last-14-days svg[role=img]")
    expect(chart).to_be_visible()
    expect(chart.locator("rect.s-ok")).to_have_count(1)
    expect(chart.locator("rect.s-bad")).to_have_count(1)
    assert chart.bounding_box()["width"] > 500

    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#shortcuts")).to_be_hidden()
    page.keyboard.press("g")
    page.keyboard.press("a")
    page.wait_for_url(at(live_server.url, "/audit/"))
    page.keyboard.press("/")
    expect(page.locator("#audit-action")).to_be_focused()


def test_a_refused_action_shows_a_toast(login, live_server, workspace):
    page = login(workspace=workspace, role="admin")
    page.goto(f"{live_server.url}/agents/")
    page.fill("#agent-name", "gaia/chat")
    # Demote the person behind the page's back: the next action is refused (403).
    from memory.models import Membership

    Membership.objects.filter(workspace=workspace).update(role="viewer")
    page.press("#agent-name", "Enter")
    expect(page.locator("#toasts .toast.error")).to_contain_text(
        "This needs the admin role in this workspace."
    )
