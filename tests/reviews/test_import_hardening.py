"""The Export page's import answers every bad file with a form error (never a 500 or
a traceback), refuses credentials like every other write, and holds uploads to one
limit, CAIRN_IMPORT_MAX_BYTES, which its refusal names."""

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memory.models import AuditEvent, Knowledge
from memory.privacy.exports import FORMAT, VERSION, export_write
from memory.privacy.selection import Selector
from tests.factories.identity import WorkspaceFactory
from tests.factories.privacy import bundle, ready_agent, workspace_ready

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
HEADER = {"type": "header", "format": FORMAT, "version": VERSION, "workspace": {"name": "x"}}
SECRET = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


def _jsonl(*lines) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _record(section: str, record) -> dict:
    return {"type": "record", "section": section, "record": record}


MALFORMED = {
    "an array": b"[1, 2, 3]",
    "binary": b"\xff\xfe\x00\x01garbage",
    "sections not an object": json.dumps(
        {"format": FORMAT, "version": VERSION, "sections": [1]}
    ).encode(),
    "a record that is a number": _jsonl(HEADER, _record("knowledge", 5)),
    "a record without an id": _jsonl(HEADER, _record("knowledge", {"content": "x"})),
    "a string id": _jsonl(HEADER, _record("knowledge", {"id": "x", "content": "x"})),
    "a confidence that is a word": _jsonl(
        HEADER,
        _record(
            "knowledge",
            {"id": 1, "content": "x", "confidence": "high", "category": "note", "status": "active"},
        ),
    ),
    "a date that is not one": _jsonl(
        HEADER,
        _record(
            "knowledge", {"id": 1, "content": "x", "created_at": "yesterday", "status": "active"}
        ),
    ),
    "an unknown status": _jsonl(
        HEADER, _record("knowledge", {"id": 1, "content": "x", "status": "on fire"})
    ),
    "a wrong version": json.dumps({**HEADER, "version": 999, "sections": {}}).encode(),
}


@pytest.fixture
def admin(member_client):
    return member_client(workspace=WorkspaceFactory(name="restored"), role="admin")


def _post(admin, data: bytes, name="export.jsonl", **extra):
    upload = SimpleUploadedFile(name, data, content_type="application/octet-stream")
    return admin.post("/exports/import/", {"file": upload}, **extra)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_file_is_a_form_error_not_a_500(admin, name):
    response = _post(admin, MALFORMED[name], **HX)
    assert response.status_code == 422, (name, response.status_code)
    html = response.content.decode()
    assert "Traceback" not in html and "/work/" not in html and ".py" not in html
    assert "export" in html.lower()
    assert not Knowledge.objects.exists()
    assert not AuditEvent.objects.filter(action="export.import").exists()


def test_a_file_holding_a_credential_is_refused(admin, workspace):
    workspace_ready(workspace)
    bundle(agent=ready_agent(workspace, "gaia/chat"), name="alpha")
    Knowledge.objects.filter(workspace=workspace).update(content=f"the token is {SECRET}")
    out = io.StringIO()
    export_write(workspace=workspace, selector=Selector(kind="workspace"), out=out, fmt="jsonl")
    response = _post(admin, out.getvalue().encode(), **HX)
    assert response.status_code == 422
    html = response.content.decode()
    assert "Cairn never stores secrets" in html and SECRET not in html
    assert not Knowledge.objects.filter(workspace__name="restored").exists()


def test_the_upload_limit_is_the_import_limit_and_says_so(admin, settings):
    settings.CAIRN_IMPORT_MAX_BYTES = 4 * 1024 * 1024
    # Over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) but under the import limit: read.
    under = _post(admin, b"{" + b" " * (3 * 1024 * 1024) + b"}", **HX)
    assert under.status_code == 422 and f"Not a {FORMAT} version" in under.content.decode()
    over = _post(admin, b"{" + b" " * (5 * 1024 * 1024) + b"}", **HX)
    assert over.status_code == 413
    assert "4.0\xa0MB" in over.content.decode() or "4.0 MB" in over.content.decode()
    assert "CAIRN_IMPORT_MAX_BYTES" in over.content.decode()
