"""In Chromium: an admin erases a person end to end, and exports and downloads (export is
an admin's, SPEC section 2)."""

import json

import pytest
from playwright.sync_api import expect

from memory.models import ErasureReceipt, Knowledge
from tests.browser.conftest import at
from tests.factories.privacy import bundle, ready_agent, sql_sweep, workspace_ready

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_erases_a_person_and_keeps_the_certificate(
    login, live_server, workspace, celery_worker_process, tmp_path
):
    workspace_ready(workspace)
    agent = ready_agent(workspace, "gaia/chat")
    gone = bundle(agent=agent, name="sarah", entity="person:sarah_chen")
    kept = bundle(agent=agent, name="kept")
    page = login(workspace=workspace, role="admin")
    page.click("#nav >> text=Erasure")
    page.wait_for_url(at(live_server.url, "/erasures/"))
    expect(page.locator("#rows .empty-state")).to_contain_text("No erasure")

    # Choose the selector: only the value field for an entity shows, and its placeholder
    # follows the kind with a real value of this workspace.
    page.select_option("#erasure-kind", "agent")
    expect(page.locator("#erasure-value")).to_have_attribute("placeholder", "e.g. gaia/chat")
    page.select_option("#erasure-kind", "entity")
    expect(page.locator("#erasure-remote")).to_be_hidden()
    expect(page.locator("#erasure-value")).to_have_attribute("placeholder", "e.g. person:kept")
    page.fill("#erasure-value", "person:sarah_chen")
    page.get_by_role("button", name="Preview what goes").click()

    # The preview counts rows per table; nothing is gone yet.
    counts = page.get_by_test_id("preview-counts")
    expect(counts).to_contain_text("Knowledge items")
    expect(page.locator("#preview-title")).to_contain_text("This erasure deletes")
    assert Knowledge.objects.filter(pk__in=gone.knowledge).exists()

    # A wrong name is refused in place; the right one queues the job.
    page.fill("#erase-reason", "deletion request 42")
    page.fill("#erase-confirm", "not-it")
    page.get_by_role("button", name="for good").click()
    expect(page.locator("#erase-confirm-error")).to_contain_text("Type the workspace name")
    assert not ErasureReceipt.objects.exists()
    page.fill("#erase-confirm", workspace.name)
    page.get_by_role("button", name="for good").click()

    # The certificate page follows the real worker until it is done.
    page.wait_for_url(at(live_server.url, "/erasures/*/"))
    expect(page.get_by_test_id("erasure-status")).to_have_text("completed", timeout=60000)
    expect(page.get_by_test_id("certificate")).to_contain_text("Certificate of erasure")
    receipt = ErasureReceipt.objects.get()
    expect(page.get_by_test_id("rows-deleted")).to_have_text(str(receipt.rows_deleted))
    expect(page.get_by_test_id("receipt-digest")).to_have_text(receipt.digest)
    with page.expect_download() as info:
        page.get_by_test_id("receipt-download").click()
    path = tmp_path / "receipt.json"
    info.value.save_as(path)
    body = json.loads(path.read_text())
    assert body["digest"] == receipt.digest and body["counts"]["memory.Knowledge"] == 1
    assert "sarah" not in path.read_text()

    assert not Knowledge.objects.filter(pk__in=gone.knowledge).exists()
    assert Knowledge.objects.filter(pk__in=kept.knowledge).exists()
    assert sql_sweep("person:sarah_chen") == {}

    # It is listed with past requests.
    page.click("#nav >> text=Erasure")
    expect(page.locator(f"#erasure-{receipt.pk}")).to_contain_text("completed")


def test_an_admin_exports_and_downloads_without_a_reload(
    login, live_server, workspace, celery_worker_process, tmp_path
):
    workspace_ready(workspace)
    bundle(agent=ready_agent(workspace, "gaia/chat"), name="alpha")
    page = login(workspace=workspace, role="admin")
    page.click("#nav >> text=Export")
    page.wait_for_url(at(live_server.url, "/exports/"))
    page.evaluate("window.__cairnMarker = 'same page'")
    page.select_option("#export-format", "jsonl")
    page.get_by_role("button", name="Start export").click()
    expect(page.locator("#toasts")).to_contain_text("started")
    download_link = page.locator("#export-rows tr").first.get_by_role("link", name="Download")
    expect(download_link).to_be_visible(timeout=60000)
    with page.expect_download() as info:
        download_link.click()
    path = tmp_path / "export.jsonl"
    info.value.save_as(path)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "header"
    assert any("The alpha team deploys on Fridays." in line for line in lines)
    assert page.evaluate("window.__cairnMarker") == "same page"


def test_an_admin_imports_an_export_into_an_empty_workspace(login, live_server, tmp_path):
    import io

    from memory.models import Outcome
    from memory.privacy.exports import export_write
    from memory.privacy.integrity import references_dangling
    from memory.privacy.selection import Selector
    from tests.factories.identity import WorkspaceFactory

    source = WorkspaceFactory(name="old-team")
    workspace_ready(source)
    bundle(agent=ready_agent(source, "gaia/chat"), name="alpha")
    out = io.StringIO()
    export_write(workspace=source, selector=Selector(kind="workspace"), out=out, fmt="jsonl")
    path = tmp_path / "old-team.jsonl"
    path.write_text(out.getvalue())
    empty = WorkspaceFactory(name="new-team")

    page = login(workspace=empty, role="admin")
    page.goto(f"{live_server.url}/exports/")
    page.evaluate("window.__cairnMarker = 'same page'")
    page.set_input_files("#import-file", str(path))
    page.get_by_role("button", name="Import into new-team").click()
    report = page.get_by_test_id("import-report")
    expect(report).to_contain_text("into new-team from old-team")
    expect(page.get_by_test_id("import-dropped")).to_have_text("0")
    assert page.evaluate("window.__cairnMarker") == "same page"  # htmx, no reload
    assert (
        Outcome.objects.filter(workspace=empty).count()
        == Outcome.objects.filter(workspace=source).count()
    )
    assert references_dangling(workspace=empty) == []
    # A second try is refused: the workspace holds data now.
    page.reload()
    expect(page.get_by_test_id("import-not-empty")).to_be_visible()
