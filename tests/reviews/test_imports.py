"""Import from the Export page: admins only, CSRF, audited, into an empty workspace."""

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from memory.models import AuditEvent, Knowledge, Outcome
from memory.privacy.exports import export_write
from memory.privacy.integrity import references_dangling
from memory.privacy.selection import Selector
from tests.factories.identity import WorkspaceFactory
from tests.factories.privacy import bundle, ready_agent, workspace_ready
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def export_file(workspace):
    """An export of a populated workspace, as bytes an admin uploads."""
    workspace_ready(workspace)
    bundle(agent=ready_agent(workspace, "gaia/chat"), name="alpha")
    out = io.StringIO()
    export_write(workspace=workspace, selector=Selector(kind="workspace"), out=out)
    return out.getvalue().encode()


def _upload(data: bytes, name="export.json"):
    return SimpleUploadedFile(name, data, content_type="application/json")


@pytest.fixture
def empty():
    return WorkspaceFactory(name="restored")


def test_an_admin_imports_into_an_empty_workspace_and_sees_the_report(
    member_client, empty, export_file
):
    admin = member_client(workspace=empty, role="admin")
    page = admin.get("/exports/").content.decode()
    assert "Import an export" in page and 'name="file"' in page
    response = admin.post("/exports/import/", {"file": _upload(export_file)}, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="card" id="import-form"')
    assert 'data-testid="import-report"' in html and "into restored" in html
    expected = json.loads(export_file)["counts"]
    assert Outcome.objects.filter(workspace=empty).count() == expected["outcomes"]
    assert Knowledge.objects.filter(workspace=empty).count() == expected["knowledge"]
    assert references_dangling(workspace=empty) == []
    event = AuditEvent.objects.get(action="export.import", workspace=empty)
    assert event.actor == f"user:{admin.user.username}"
    assert event.details["references_remapped"] > 0
    # Now the workspace holds data: the form says why it is gone instead.
    page = admin.get("/exports/").content.decode()
    assert 'data-testid="import-not-empty"' in page and 'name="file"' not in page
    # The hint names the person's own (existing) username, so it says the command keeps
    # their password (create_user resets one only with --reset-password).
    assert f"NEW_WORKSPACE {admin.user.username} admin --create-workspace" in page
    assert "leaves your password alone" in page and "--reset-password" not in page


def test_without_htmx_it_redirects_with_the_report_as_a_message(member_client, empty, export_file):
    admin = member_client(workspace=empty, role="admin")
    response = admin.post("/exports/import/", {"file": _upload(export_file)}, follow=True)
    url, status = response.redirect_chain[-1]
    assert (without_ws(url), status) == ("/exports/", 303)
    assert "rows into restored" in response.content.decode()


def test_it_refuses_a_workspace_that_holds_data(member_client, workspace, export_file):
    admin = member_client(workspace=workspace, role="admin")
    before = Outcome.objects.count()
    response = admin.post("/exports/import/", {"file": _upload(export_file)}, **HX)
    assert response.status_code == 422
    assert "import only into an empty workspace" in response.content.decode()
    assert Outcome.objects.count() == before


def test_it_names_what_is_wrong_with_the_file(member_client, empty):
    admin = member_client(workspace=empty, role="admin")
    response = admin.post("/exports/import/", {}, **HX)
    assert response.status_code == 422 and "Choose an export file" in response.content.decode()
    response = admin.post("/exports/import/", {"file": _upload(b"{nope")}, **HX)
    assert response.status_code == 422 and "Not a Cairn export" in response.content.decode()
    response = admin.post("/exports/import/", {"file": _upload(b'{"format": "x"}')}, **HX)
    assert response.status_code == 422 and "cairn-export version 1" in response.content.decode()


def test_it_refuses_a_file_over_the_limit(member_client, empty, export_file, settings):
    settings.CAIRN_IMPORT_MAX_BYTES = 100
    admin = member_client(workspace=empty, role="admin")
    response = admin.post("/exports/import/", {"file": _upload(export_file)}, **HX)
    assert response.status_code == 422 and "import_export" in response.content.decode()
    assert not Outcome.objects.filter(workspace=empty).exists()


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_only_admins_may_import(member_client, empty, export_file, role):
    client = member_client(workspace=empty, role=role)
    response = client.post("/exports/import/", {"file": _upload(export_file)})
    assert response.status_code == 403
    assert not Outcome.objects.filter(workspace=empty).exists()
    if role == "reviewer":
        assert 'name="file"' not in client.get("/exports/").content.decode()


def test_it_needs_the_csrf_token(empty, export_file):
    from memory.identity.services import user_create

    user, _ = user_create(workspace=empty, username="a", role="admin", password="pw-x-123")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post("/exports/import/", {"file": _upload(export_file)})
    assert response.status_code == 403
    assert not Outcome.objects.filter(workspace=empty).exists()


def test_it_answers_get_with_405(member_client, empty):
    assert member_client(workspace=empty, role="admin").get("/exports/import/").status_code == 405
