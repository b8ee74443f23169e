"""Erasure requests: admin only; preview counts, typed confirmation, progress, certificate."""

import json
import re

import pytest
from django.test import Client

from memory.models import AuditEvent, ErasureReceipt, JobRun, Knowledge
from memory.privacy.erasure import erasure_job
from memory.privacy.exports import export_dir
from tests.factories.identity import WorkspaceFactory
from tests.factories.knowledge import KnowledgeFactory
from tests.factories.privacy import bundle, ready_agent, workspace_ready
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def admin(member_client, workspace):
    return member_client(workspace=workspace, role="admin")


@pytest.fixture
def populated(workspace):
    workspace_ready(workspace)
    agent = ready_agent(workspace, "gaia/chat")
    return bundle(agent=agent, name="gone", entity="person:sarah_chen"), bundle(
        agent=agent, name="kept"
    )


@pytest.fixture(autouse=True)
def _no_truncate(settings):
    settings.CAIRN_ERASURE_VACUUM_TRUNCATE = False  # see tests/memory/test_erasure.py


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_it_is_for_admins_only(member_client, workspace, role):
    client = member_client(workspace=workspace, role=role)
    assert client.get("/erasures/").status_code == 403
    data = {"kind": "entity", "value": "x", "confirm": workspace.name}
    assert client.post("/erasures/preview/", data).status_code == 403
    assert client.post("/erasures/start/", data).status_code == 403
    receipt = ErasureReceipt.objects.create(
        workspace=workspace, workspace_name=workspace.name, requested_by="u", selector={}
    )
    assert client.get(f"/erasures/{receipt.pk}/").status_code == 403
    assert client.get(f"/erasures/{receipt.pk}/receipt.json").status_code == 403
    assert not JobRun.objects.filter(kind="erasure").exists()


def test_it_shows_the_form_and_past_requests(admin, workspace):
    ErasureReceipt.objects.create(
        workspace=workspace,
        workspace_name=workspace.name,
        requested_by="user:root",
        selector={"kind": "text", "sha256": "ab" * 32, "length": 9},
    )
    html = admin.get("/erasures/").content.decode()
    assert "New erasure" in html and "Past requests" in html
    assert "sha256 abababababab" in html and "9 chars" in html
    assert 'method="post" action="/erasures/preview/"' in without_ws(html)
    fragment = admin.get("/erasures/", **HX).content.decode()
    assert "<html" not in fragment


def test_it_previews_counts_per_table_and_deletes_nothing(admin, workspace, populated):
    gone, _ = populated
    response = admin.post(
        "/erasures/preview/", {"kind": "entity", "value": "person:sarah_chen"}, **HX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "This erasure deletes" in html and "“person:sarah_chen”" in html
    assert "Knowledge items" in html  # in words, not memory.Knowledge / "knowledges"
    assert "memory.Knowledge" not in html and "knowledges" not in html
    assert 'name="confirm"' in html and workspace.name in html
    assert 'type="hidden" name="value" value="person:sarah_chen"' in html
    assert Knowledge.objects.filter(pk__in=gone.knowledge).exists()


def test_it_says_when_nothing_matches(admin, workspace):
    html = admin.post(
        "/erasures/preview/", {"kind": "context", "value": "nope"}, **HX
    ).content.decode()
    assert "Nothing matches “nope”" in html and 'name="confirm"' not in html
    assert "No row of this workspace matches that context" in html


def test_it_names_a_bad_selector(admin, workspace):
    response = admin.post("/erasures/preview/", {"kind": "text", "value": "ab"}, **HX)
    assert response.status_code == 422
    assert "at least 3 characters" in response.content.decode()


def test_it_refuses_without_the_typed_workspace_name(admin, workspace, populated):
    data = {"kind": "entity", "value": "person:sarah_chen", "confirm": "yes please"}
    response = admin.post("/erasures/start/", data, **HX)
    assert response.status_code == 422
    assert "Type the workspace name" in response.content.decode()
    assert not ErasureReceipt.objects.exists()


def test_it_queues_the_erasure_audits_it_and_goes_to_its_page(admin, workspace, populated):
    data = {
        "kind": "entity",
        "value": "person:sarah_chen",
        "confirm": workspace.name,
        "reason": "request 42",
    }
    response = admin.post("/erasures/start/", data)
    receipt = ErasureReceipt.objects.get()
    assert response.status_code == 303
    assert response["Location"] == f"/erasures/{receipt.pk}/?ws={workspace.name}"
    assert receipt.requested_by == f"user:{admin.user.username}"
    assert "sarah" not in json.dumps(receipt.selector)
    event = AuditEvent.objects.get(action="erasure.request")
    assert event.reason == "request 42" and "sarah" not in json.dumps(event.details)
    htmx = admin.post("/erasures/start/", data, **HX)
    assert htmx["HX-Redirect"].startswith("/erasures/")


def test_it_shows_progress_then_the_certificate(admin, workspace, populated):
    gone, kept = populated
    data = {"kind": "entity", "value": "person:sarah_chen", "confirm": workspace.name}
    admin.post("/erasures/start/", data)
    receipt = ErasureReceipt.objects.get()
    queued = admin.get(f"/erasures/{receipt.pk}/").content.decode()
    assert "hx-trigger" in queued and "queued" in queued
    # The "queued" toast follows its job: no change while it is queued...
    toast = f"/jobs/{receipt.job_run_id}/toast/"
    assert f'hx-get="{toast}"' in without_ws(queued) and "data-follows" in queued
    assert admin.get(toast, **HX).status_code == 204
    # The worker's part, run here: the same job body the task calls.
    run = JobRun.objects.get(pk=receipt.job_run_id)
    erasure_job(run=run, message={"kind": "entity", "value": "person:sarah_chen"})
    done = admin.get(f"/erasures/{receipt.pk}/", **HX).content.decode()
    assert "Certificate of erasure" in done and "hx-trigger" not in done.split("</section>")[0]
    # ... then the toast says how it ended (the task wrapper records the status), and
    # stops polling.
    JobRun.objects.filter(pk=run.pk).update(status="succeeded")
    ended = admin.get(toast, **HX).content.decode()
    assert f"erasure run #{run.pk} finished." in ended
    assert "hx-get" not in ended and "queued" not in ended
    receipt.refresh_from_db()
    assert receipt.digest in done
    assert not Knowledge.objects.filter(pk__in=gone.knowledge).exists()
    assert Knowledge.objects.filter(pk__in=kept.knowledge).exists()
    download = admin.get(f"/erasures/{receipt.pk}/receipt.json")
    assert download["Content-Disposition"].startswith("attachment;")
    body = json.loads(download.content)
    assert body["counts"]["memory.Knowledge"] == 1 and body["digest"] == receipt.digest
    assert "sarah" not in download.content.decode()


def test_a_text_selector_never_travels_in_a_url(admin, workspace, populated):
    response = admin.post("/erasures/preview/", {"kind": "text", "value": "on Fridays"})
    html = response.content.decode()
    assert "This erasure deletes" in html
    assert 'type="hidden" name="value" value="on Fridays"' in html  # a POST field, not a URL
    assert "Fridays&" not in html and "?value=" not in html
    assert "no-cache" in response["Cache-Control"]


def test_it_hides_other_workspaces_receipts(admin):
    other = WorkspaceFactory()
    receipt = ErasureReceipt.objects.create(
        workspace=other, workspace_name=other.name, requested_by="u", selector={}
    )
    assert admin.get(f"/erasures/{receipt.pk}/").status_code == 404
    assert admin.get(f"/erasures/{receipt.pk}/receipt.json").status_code == 404


def test_it_needs_the_csrf_token(workspace):
    from memory.identity.services import user_create

    user, _ = user_create(workspace=workspace, username="a", role="admin", password="pw-x-123")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    data = {"kind": "entity", "value": "x", "confirm": workspace.name}
    assert client.post("/erasures/preview/", data).status_code == 403
    assert client.post("/erasures/start/", data).status_code == 403


def test_it_lists_past_requests_in_a_fixed_number_of_queries(
    admin, workspace, django_assert_max_num_queries
):
    for n in range(5):
        ErasureReceipt.objects.create(
            workspace=workspace,
            workspace_name=workspace.name,
            requested_by="u",
            selector={"kind": "context", "sha256": "0" * 64, "length": n},
            counts={"memory.Knowledge": n},
        )
    with django_assert_max_num_queries(10):
        admin.get("/erasures/", **HX)


def _placeholders(html: str) -> dict[str, str]:
    return dict(re.findall(r'<option value="(\w+)" data-placeholder="([^"]*)"', html))


def test_each_kinds_placeholder_is_a_real_value_of_this_workspace(admin, workspace, populated):
    html = admin.get("/erasures/").content.decode()
    examples = _placeholders(html)
    # The newest rows' values: typing one of them would match something.
    assert examples["agent"] == "e.g. gaia/chat"
    assert examples["entity"] == "e.g. person:kept"
    assert examples["context"] == "e.g. ctx-kept" and examples["session"] == "e.g. sess-kept"
    # The form opens on "entity": its input already shows the entity example.
    assert 'placeholder="e.g. person:kept" data-placeholder-from="erasure-kind"' in html
    preview = admin.post(
        "/erasures/preview/", {"kind": "entity", "value": examples["entity"][5:]}
    ).content.decode()
    assert "This erasure deletes" in preview


def test_a_new_workspaces_placeholders_say_what_to_type(admin, workspace):
    KnowledgeFactory(workspace=workspace, context="global")
    examples = _placeholders(admin.get("/erasures/").content.decode())
    # Nothing to show yet (and never "global", which would reach most of a workspace).
    assert examples["entity"] == "an entity as agents write it, kind:name"
    assert "global" not in examples["context"] and not examples["context"].startswith("e.g.")
    assert examples["text"].startswith("any words")


@pytest.fixture
def export_file(workspace, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    directory = export_dir(workspace)
    directory.mkdir(parents=True)
    path = directory / "cairn-export-test.json"
    path.write_text("{}" * 1000)
    run = JobRun.objects.create(
        workspace=workspace,
        kind="export",
        status="succeeded",
        result={"file": str(path.relative_to(tmp_path))},
    )
    return run, path


def test_the_preview_names_the_export_files_the_certificate_counts(
    admin, workspace, populated, export_file
):
    run, path = export_file
    data = {"kind": "entity", "value": "person:sarah_chen"}
    html = admin.post("/erasures/preview/", data, **HX).content.decode()
    assert "every export file of this workspace, 1 file" in html
    assert f"Export #{run.pk}: <code>cairn-export-test.json</code>" in html
    assert "2\xa0KB" in html  # 2,000 bytes, in words (not "2.0 KB")
    assert "and 1 export file for good</button>" in html
    admin.post("/erasures/start/", {**data, "confirm": workspace.name})
    receipt = ErasureReceipt.objects.get()
    erasure_job(run=receipt.job_run, message=data)
    done = admin.get(f"/erasures/{receipt.pk}/").content.decode()
    assert "and 1 export file," in done and not path.exists()
    # The rows deleted are named in words; the receipt's label stays a tooltip.
    assert ">Knowledge items</td>" in done and ">memory.Knowledge<" not in done


def test_a_preview_without_export_files_says_so(admin, workspace, populated, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    data = {"kind": "entity", "value": "person:sarah_chen"}
    html = admin.post("/erasures/preview/", data, **HX).content.decode()
    assert "This workspace has no export file" in html and "export file for good" not in html
