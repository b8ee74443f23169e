"""Import is not a trust channel: an export keeps who reported each row (harness,
person, approvals) only when it is signed by this installation's key or one the
operator lists in CAIRN_IMPORT_TRUSTED_KEYS. A file edited by hand, unsigned, or
signed by a key nobody registered arrives as the agent's word, pending review.
"""

import io
import json

import pytest

from memory.models import Channel, LearnedFact, Lesson, SkillDelta
from memory.privacy.exports import export_write
from memory.privacy.imports import export_import
from memory.privacy.selection import Selector
from memory.privacy.signing import export_signing_key
from tests.factories.identity import WorkspaceFactory, person_actor
from tests.factories.privacy import bundle, ready_agent, workspace_ready

pytestmark = pytest.mark.django_db


@pytest.fixture
def exported(workspace) -> list[dict]:
    """A genuine JSON Lines export of a workspace with a lesson, a delta and a fact."""
    workspace_ready(workspace)
    bundle(agent=ready_agent(workspace, "gaia/chat"), name="alpha")
    out = io.StringIO()
    export_write(
        workspace=workspace,
        selector=Selector(kind="workspace", value=workspace.name),
        out=out,
        fmt="jsonl",
    )
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _tampered(lines: list[dict]) -> list[dict]:
    """What an attacker edits: every lesson a person's, active at 0.95; every delta
    active, trusted and approved by the admin."""
    for line in lines:
        record = line.get("record") or {}
        if line.get("section") == "lessons":
            record.update(
                state="active", confidence=0.95, source="user", channel="person", pinned=True
            )
        elif line.get("section") == "skill_deltas":
            record.update(
                status="active", trust="trusted", approved_by="user:admin", channel="person"
            )
    return lines


def _write(path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))


def _import(path):
    return export_import(workspace=WorkspaceFactory(), path=path, actor=person_actor("admin"))


def _assert_claimed(report) -> None:
    workspace = report.workspace
    assert report.signed_by == ""
    lessons = Lesson.objects.filter(workspace__name=workspace)
    assert lessons.exists()
    assert not lessons.filter(state="active").exists()
    assert not lessons.filter(source="user").exists()
    assert not lessons.filter(confidence__gt=0.3).exists()
    assert not lessons.filter(pinned=True).exists()
    assert set(lessons.values_list("channel", flat=True)) == {Channel.AGENT}
    deltas = SkillDelta.objects.filter(workspace__name=workspace)
    assert deltas.exists()
    assert not deltas.filter(approved_by="user:admin").exists()
    assert set(deltas.values_list("status", flat=True)) <= {"quarantined", "archived", "orphaned"}
    assert set(deltas.values_list("trust", flat=True)) == {"untrusted"}
    assert not LearnedFact.objects.filter(workspace__name=workspace).exists()
    assert report.skipped["learned_facts"] >= 1
    assert any("Not signed by a key this installation trusts" in line for line in report.lines())


def test_a_tampered_export_arrives_claimed_and_pending_review(exported, tmp_path):
    path = tmp_path / "tampered.jsonl"
    _write(path, _tampered(exported))  # the signature line is kept: it no longer matches
    _assert_claimed(_import(path))


def test_an_unsigned_export_arrives_claimed(exported, tmp_path):
    path = tmp_path / "unsigned.jsonl"
    _write(path, [line for line in _tampered(exported) if line["type"] != "signature"])
    _assert_claimed(_import(path))


def test_a_signed_export_keeps_its_channels(exported, tmp_path):
    path = tmp_path / "signed.jsonl"
    _write(path, exported)
    report = _import(path)
    assert report.signed_by
    assert LearnedFact.objects.filter(workspace__name=report.workspace).exists()
    assert SkillDelta.objects.filter(workspace__name=report.workspace, trust="trusted").exists()


def test_another_installations_key_counts_only_once_registered(
    exported, tmp_path, settings, workspace
):
    settings.SECRET_KEY = "another-installation-" + "x" * 40
    other_key = export_signing_key()
    out = io.StringIO()
    export_write(
        workspace=workspace,
        selector=Selector(kind="workspace", value=workspace.name),
        out=out,
        fmt="json",
    )
    settings.SECRET_KEY = "this-installation-" + "y" * 40
    path = tmp_path / "other.json"
    path.write_text(out.getvalue())
    assert _import(path).signed_by == ""
    settings.CAIRN_IMPORT_TRUSTED_KEYS = [other_key]
    report = _import(path)
    assert report.signed_by and LearnedFact.objects.filter(workspace__name=report.workspace)
