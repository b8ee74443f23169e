"""An admin runs reconcile now from the Job runs page (a real worker runs it), then a
reviewer settles the contradiction it queued by editing both into one."""

import pytest
from playwright.sync_api import expect

from memory.models import JobRun, Knowledge, ReviewItem
from tests.factories.maintenance import plant

pytestmark = pytest.mark.django_db(transaction=True)


def test_run_now_then_settle_the_contradiction(
    login, live_server, workspace, celery_worker_process
):
    items = plant(workspace)
    page = login(workspace=workspace, role="admin")
    page.goto(f"{live_server.url}/jobs/")
    page.evaluate("window.__cairnMarker = 'same page'")
    page.click("[data-testid=run-reconcile]")
    expect(page.locator("#rows tbody")).to_contain_text("reconcile")
    run = JobRun.objects.get(kind="reconcile")
    row = page.locator(f"#job-{run.pk}")
    expect(row).to_be_visible()
    expect(row.locator(".badge.succeeded")).to_be_visible(timeout=60000)  # polled in place
    expect(row).to_contain_text("sent to review 1")  # counts in words
    assert page.evaluate("window.__cairnMarker") == "same page"

    review = ReviewItem.objects.get(workspace=workspace)
    page.click("#nav >> text=Contradictions")
    card = page.locator(f"#item-{review.pk}")
    expect(card).to_contain_text("reconcile.decide")
    card.locator("summary", has_text="Edit into one…").click()
    card.locator("textarea[name=text]").fill("The nightly backup job writes to bucket cairn-v2")
    card.locator("input[name=reason]").last.fill("the bucket was renamed")
    card.locator("button", has_text="Save as one").click()
    expect(page.locator(f"#item-{review.pk}")).to_contain_text("Resolved: edited into one")
    person = Knowledge.objects.get(pk=items["person"].pk)
    assert Knowledge.objects.get(pk=person.superseded_by_id).content.endswith("cairn-v2")
    assert Knowledge.objects.get(pk=items["agent_vs_person"].pk).status == "archived"
