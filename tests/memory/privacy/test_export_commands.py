"""manage.py export and import_export, from the shell."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from memory.models import AuditEvent, Knowledge, Workspace
from tests.factories.privacy import bundle, ready_agent, workspace_ready
from tests.memory.privacy.test_exports import normalised

pytestmark = pytest.mark.django_db


@pytest.fixture
def populated(workspace):
    workspace_ready(workspace)
    bundle(agent=ready_agent(workspace, "gaia/chat"), name="alpha")
    bundle(agent=ready_agent(workspace, "gaia/code"), name="beta")
    return workspace


def test_it_exports_to_a_file_and_imports_it_into_a_new_workspace(populated, tmp_path):
    path = tmp_path / "ws.jsonl"
    err = io.StringIO()
    call_command("export", populated.name, "--format", "jsonl", "-o", str(path), stderr=err)
    assert "Exported" in err.getvalue()
    out = io.StringIO()
    call_command(
        "import_export", str(path), "restored", "--create-workspace", stdout=out, stderr=err
    )
    assert "Created workspace 'restored'" in out.getvalue()
    assert "rows into restored" in out.getvalue() and "References remapped:" in out.getvalue()
    restored = Workspace.objects.get(name="restored")
    assert Knowledge.objects.filter(workspace=restored).count() == 4  # 2 items, 2 error items
    again, original = io.StringIO(), io.StringIO()
    call_command("export", "restored", stdout=again, stderr=io.StringIO())
    call_command("export", populated.name, stdout=original, stderr=io.StringIO())
    assert normalised(again.getvalue()) == normalised(original.getvalue())
    assert AuditEvent.objects.filter(action="export.shell", workspace=populated).exists()
    assert AuditEvent.objects.filter(action="export.import", workspace=restored).exists()


def test_it_exports_one_agent_to_stdout(populated):
    out = io.StringIO()
    call_command("export", populated.name, "--agent", "gaia/code", stdout=out, stderr=io.StringIO())
    doc = json.loads(out.getvalue())
    assert [a["name"] for a in doc["sections"]["agents"]["records"]] == ["gaia/code"]


def test_it_names_what_is_wrong(populated, tmp_path):
    with pytest.raises(CommandError, match="No agent named"):
        call_command("export", populated.name, "--agent", "nobody", stderr=io.StringIO())
    with pytest.raises(CommandError, match="No workspace"):
        call_command("export", "missing-ws", stderr=io.StringIO())
    path = tmp_path / "x.json"
    call_command("export", populated.name, "-o", str(path), stderr=io.StringIO())
    with pytest.raises(CommandError, match="empty"):
        call_command("import_export", str(path), populated.name, stderr=io.StringIO())
    # A mistyped workspace is refused, not created.
    with pytest.raises(CommandError, match="--create-workspace"):
        call_command("import_export", str(path), "restord", stderr=io.StringIO())
    assert not Workspace.objects.filter(name="restord").exists()
    # A file that is not an export creates nothing either.
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CommandError, match="Not a Cairn export"):
        call_command("import_export", str(bad), "fresh", "--create-workspace", stderr=io.StringIO())
    assert not Workspace.objects.filter(name="fresh").exists()
