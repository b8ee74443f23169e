"""Export page: admins start exports, watch them and download the file (SPEC section 2:
export is an admin's; the roles table, memory/identity/roles.py)."""

import pytest
from django.test import Client

from memory.models import AuditEvent, JobRun
from memory.privacy.exports import export_job
from tests.factories.identity import WorkspaceFactory
from tests.factories.privacy import bundle, ready_agent, workspace_ready
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path  # export files of these tests stay out of var/


@pytest.fixture
def reviewer(member_client, workspace):
    """Whoever may export: an admin (the fixture keeps its old name for the diff's sake)."""
    return member_client(workspace=workspace, role="admin")


def _finished_export(workspace, fmt="json"):
    """An export run done by the job body itself (no worker needed here)."""
    run = JobRun.objects.create(
        kind="export",
        workspace=workspace,
        params={"selector": {"kind": "workspace", "value": workspace.name}, "format": fmt},
        requested_by="user:r",
        status=JobRun.Status.SUCCEEDED,
    )
    export_job(run=run)
    run.save()
    return run


@pytest.mark.parametrize(("role", "status"), [("viewer", 403), ("reviewer", 403), ("admin", 200)])
def test_it_lets_only_admins_in(member_client, workspace, role, status):
    client = member_client(workspace=workspace, role=role)
    assert client.get("/exports/").status_code == status
    assert client.post("/exports/start/", {"kind": "workspace"}).status_code in (
        (403,) if status == 403 else (303,)
    )


def test_it_shows_the_page_and_the_rows_fragment(reviewer, workspace):
    run = _finished_export(workspace)
    page = reviewer.get("/exports/").content.decode()
    assert "<html" in page and "New export" in page and f"export-{run.pk}" in page
    fragment = reviewer.get("/exports/", **HX).content.decode()
    assert "<html" not in fragment and fragment.lstrip().startswith('<div id="rows"')


def test_a_files_size_reads_in_words(reviewer, workspace):
    run = _finished_export(workspace)
    JobRun.objects.filter(pk=run.pk).update(result={**run.result, "bytes": 512 * 1024 * 1024})
    html = reviewer.get("/exports/", **HX).content.decode()
    assert "512\xa0MB" in html and "512.0" not in html


def test_it_starts_an_export_as_a_job_and_audits_it(reviewer, workspace):
    response = reviewer.post("/exports/start/", {"kind": "workspace", "format": "jsonl"}, **HX)
    assert response.status_code == 200
    run = JobRun.objects.get(kind="export", workspace=workspace)
    assert run.params["format"] == "jsonl"
    assert run.requested_by == f"user:{reviewer.user.username}"
    html = response.content.decode()
    assert f'id="export-{run.pk}"' in html and "every" in html  # the new row polls
    assert AuditEvent.objects.filter(action="export.request", target_id=str(run.pk)).exists()


def test_it_names_what_is_wrong_with_the_scope(reviewer, workspace):
    response = reviewer.post("/exports/start/", {"kind": "agent", "value": "nobody"}, **HX)
    assert response.status_code == 422
    assert "No agent named" in response.content.decode()
    assert not JobRun.objects.filter(kind="export").exists()


def test_it_polls_a_running_export_row(reviewer, workspace):
    run = JobRun.objects.create(kind="export", workspace=workspace, status="running", params={})
    html = reviewer.get(f"/exports/{run.pk}/", **HX).content.decode()
    assert html.lstrip().startswith(f'<tr id="export-{run.pk}"') and "hx-trigger" in html


def test_it_serves_the_file_to_a_reviewer_and_audits_the_download(reviewer, workspace):
    workspace_ready(workspace)
    bundle(agent=ready_agent(workspace, "gaia/chat"), name="alpha")
    run = _finished_export(workspace)
    response = reviewer.get(f"/exports/{run.pk}/download/")
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    body = b"".join(response.streaming_content).decode()
    assert "The alpha team deploys on Fridays." in body
    assert AuditEvent.objects.filter(action="export.download", target_id=str(run.pk)).exists()


def test_it_never_serves_files_to_viewers_strangers_or_other_workspaces(member_client, workspace):
    run = _finished_export(workspace)
    assert Client().get(f"/exports/{run.pk}/download/").status_code == 302  # to the login
    viewer = member_client(workspace=workspace, role="viewer")
    assert viewer.get(f"/exports/{run.pk}/download/").status_code == 403
    stranger = member_client(workspace=WorkspaceFactory(), role="admin")
    assert stranger.get(f"/exports/{run.pk}/download/").status_code == 404


def test_it_answers_404_for_an_expired_file(reviewer, workspace):
    from memory.privacy.exports import export_files_forget

    run = _finished_export(workspace)
    export_files_forget(workspace=workspace)
    assert reviewer.get(f"/exports/{run.pk}/download/").status_code == 404
    assert "expired" in reviewer.get("/exports/").content.decode()


def test_it_needs_the_csrf_token(workspace):
    from memory.identity.services import user_create

    user, _ = user_create(workspace=workspace, username="r", role="reviewer", password="pw-x-123")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post("/exports/start/", {"kind": "workspace"}).status_code == 403


def test_it_lists_exports_in_a_fixed_number_of_queries(
    reviewer, workspace, django_assert_max_num_queries
):
    for _ in range(5):
        _finished_export(workspace)
    with django_assert_max_num_queries(12):
        reviewer.get("/exports/", **HX)


def _erased_by_receipt(workspace):
    """An erasure run to completion by its job body, with its receipt (no worker needed)."""
    from memory.models import ErasureReceipt
    from memory.privacy.erasure import erasure_execute
    from memory.privacy.selection import Selector

    run = JobRun.objects.create(kind="erasure", workspace=workspace, status="running")
    receipt = ErasureReceipt.objects.create(
        workspace=workspace,
        workspace_name=workspace.name,
        job_run=run,
        requested_by="user:a",
        selector={"kind": "context"},
    )
    erasure_execute(
        workspace=workspace, selector=Selector(kind="context", value="nothing-here"), run=run
    )
    return receipt


def test_an_export_deleted_by_an_erasure_says_which_with_a_link(member_client, workspace):
    run = _finished_export(workspace)
    receipt = _erased_by_receipt(workspace)
    run.refresh_from_db()
    assert run.result["expired"] and run.result["deleted_by"] == {"erasure": receipt.pk}
    admin = member_client(workspace=workspace, role="admin")
    html = admin.get("/exports/").content.decode()
    assert "deleted by" in html and f"erasure #{receipt.pk}" in html
    assert f'href="/erasures/{receipt.pk}/"' in without_ws(html)
    assert admin.get(f"/exports/{run.pk}/download/").status_code == 404
    # Exports are an admin's: a reviewer sees neither the row nor the reason.
    reviewer = member_client(workspace=workspace, role="reviewer")
    assert reviewer.get(f"/exports/{run.pk}/", **HX).status_code == 403


def test_an_export_removed_by_retention_says_so(reviewer, workspace, settings):
    import datetime as dt

    from memory.privacy.exports import export_files_forget

    run = _finished_export(workspace)
    export_files_forget(workspace=workspace, older_than=dt.datetime.now(dt.UTC) + dt.timedelta(1))
    run.refresh_from_db()
    assert run.result["deleted_by"] == {"retention_days": settings.CAIRN_RETENTION_EXPORT_DAYS}
    html = reviewer.get("/exports/").content.decode()
    assert f"expired after {settings.CAIRN_RETENTION_EXPORT_DAYS} day" in html
