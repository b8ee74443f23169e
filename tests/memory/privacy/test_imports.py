"""Import: every reference, ids inside JSON included, resolves in the new workspace."""

import io
import json

import pytest

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.lessons.posted_evidence import evidence_record
from memory.models import Evidence, Knowledge, Lesson, Outcome, SkillDelta
from memory.privacy.datamap import TABLES
from memory.privacy.exports import export_write
from memory.privacy.imports import export_import
from memory.privacy.integrity import references_dangling
from memory.privacy.references import json_specs
from memory.privacy.selection import EXPORT_SELECTORS, selector_parse
from memory.skills.deltas import delta_create
from memory.skills.jobs import delta_consolidate
from tests.factories.identity import WorkspaceFactory
from tests.factories.privacy import bundle, confirm_lesson, ready_agent, workspace_ready
from tests.factories.skills import backed
from tests.memory.privacy.test_exports import normalised
from tests.memory.skills.test_jobs import SAME

pytestmark = pytest.mark.django_db

ACTOR = Actor.system("test")


def _export_to(workspace, path, **selector):
    out = io.StringIO()
    sel = selector_parse(workspace=workspace, data=selector, allowed=EXPORT_SELECTORS)
    export_write(workspace=workspace, selector=sel, out=out)
    path.write_text(out.getvalue())
    return out.getvalue()


@pytest.fixture
def full(workspace):
    """Outcomes with lessons and knowledge in play, posted evidence, deltas with a
    consolidation umbrella, facts, conversations: every kind of JSON reference."""
    workspace_ready(workspace)
    chat = ready_agent(workspace, "gaia/chat")
    code = ready_agent(workspace, "gaia/code")
    alpha = bundle(agent=chat, name="alpha")
    beta = bundle(agent=code, name="beta")
    # gaia/code's outcome has gaia/chat's lesson and knowledge in play.
    confirm_lesson(
        agent=code,
        lesson_id=alpha.lessons[0],
        session="sess-y",
        outcome_id="y-1",
        project_remote=alpha.project_remote,
    )
    Outcome.objects.filter(agent=code, outcome_id="y-1").update(
        in_play=[
            {"type": "lesson", "id": alpha.lessons[0]},
            {"type": "knowledge", "id": alpha.knowledge[0]},
            {"type": "error", "id": beta.error_items[0]},
        ]
    )
    evidence_record(
        workspace=workspace,
        actor=Actor.for_agent(chat, channel="harness"),
        evidence_id="ev-1",
        kind="user_confirmed",
        target_type="lesson",
        target_id=alpha.lessons[0],
    )
    for n, text in enumerate(SAME):
        delta_create(
            channel="agent",
            agent=chat,
            skill_name="triage-inbox",
            kind="preference",
            anchor={"section": "drafting-replies"},
            payload={"body": text},
            provenance=backed(
                chat, {"source": "user_instruction", "turns": [f"umb-{n}#1"]}, said=text
            ),
        )
    assert delta_consolidate(workspace=workspace)["proposed"] == 1
    return workspace


def test_every_kind_of_json_reference_is_present_in_the_fixture(full):
    """The round trip below means something only if each declared JSON id occurs."""
    outcomes = Outcome.objects.filter(workspace=full)
    assert any(o.in_play for o in outcomes)
    assert any(o.response.get("lessons_created") for o in outcomes)
    assert any(o.response.get("confirmed") for o in outcomes)
    assert Evidence.objects.filter(workspace=full).exclude(response={}).exists()
    umbrella = SkillDelta.objects.get(workspace=full, provenance_source="consolidation")
    assert len(umbrella.provenance["members"]) == len(SAME)


def test_it_round_trips_with_every_reference_resolving(full, tmp_path):
    path = tmp_path / "full.json"
    original = _export_to(full, path)
    empty = WorkspaceFactory()
    report = export_import(workspace=empty, path=path, actor=ACTOR)
    assert references_dangling(workspace=empty) == []
    again = _export_to(empty, tmp_path / "again.json")
    assert normalised(again) == normalised(original)
    assert sum(report.dropped.values()) == 0
    assert report.remapped["outcomes.in_play"] >= 4
    assert report.remapped["skill_deltas.provenance"] == len(SAME)
    # Spot checks through the new ids: the same rows by content, not the old numbers.
    old = Outcome.objects.get(workspace=full, outcome_id="y-1")
    new = Outcome.objects.get(workspace=empty, outcome_id="y-1")
    old_lesson = Lesson.objects.get(pk=old.in_play[0]["id"])
    new_lesson = Lesson.objects.get(pk=new.in_play[0]["id"])
    assert new_lesson.workspace == empty and new_lesson.text == old_lesson.text
    assert Knowledge.objects.get(pk=new.in_play[1]["id"]).workspace == empty
    assert new.response["id"] == new.pk
    umbrella = SkillDelta.objects.get(workspace=empty, provenance_source="consolidation")
    assert sorted(umbrella.provenance["members"]) == sorted(
        umbrella.members.values_list("pk", flat=True)
    )
    evidence = Evidence.objects.get(workspace=empty)
    assert evidence.response["id"] == evidence.pk
    assert evidence.response["target_id"] == evidence.target_id
    assert Lesson.objects.get(pk=evidence.target_id).workspace == empty


def test_the_reference_walk_fails_on_a_dangling_id(full):
    """The check the round trip relies on can fail: one bad id in each kind of place."""
    assert references_dangling(workspace=full) == []
    elsewhere = WorkspaceFactory()
    played = Outcome.objects.get(workspace=full, outcome_id="y-1").in_play
    stranger = Lesson.objects.get(pk=played[0]["id"])
    Lesson.objects.filter(pk=stranger.pk).update(workspace=elsewhere)
    found = {(d.table, d.field) for d in references_dangling(workspace=full)}
    assert ("memory.Outcome", "in_play") in found
    assert ("memory.Outcome", "response") in found
    assert ("memory.Evidence", "target_id") in found
    assert ("memory.Evidence", "response") in found
    umbrella = SkillDelta.objects.get(workspace=full, provenance_source="consolidation")
    SkillDelta.objects.filter(pk=umbrella.pk).update(
        provenance={**umbrella.provenance, "members": [10**9]}
    )
    found = {(d.table, d.field) for d in references_dangling(workspace=full)}
    assert ("memory.SkillDelta", "provenance") in found


def test_every_json_reference_is_declared_with_exported_targets():
    for table in TABLES.values():
        for name, spec in table.refs.items():
            for json_spec in json_specs(spec):
                for label in json_spec.labels():
                    assert TABLES[label].export, f"{table.label}.{name} points at {label}"


def test_a_partial_export_drops_and_counts_references_outside_it(full, tmp_path):
    """gaia/code's outcome names gaia/chat's knowledge item, which is not in its export
    (gaia/chat's lesson is: the outcome is evidence for it, so the export closes over it)."""
    path = tmp_path / "code.json"
    _export_to(full, path, agent="gaia/code")
    empty = WorkspaceFactory()
    report = export_import(workspace=empty, path=path, actor=ACTOR)
    assert references_dangling(workspace=empty) == []
    assert report.dropped["outcomes.in_play"] >= 1
    outcome = Outcome.objects.get(workspace=empty, outcome_id="y-1")
    kept = {r["type"]: r["id"] for r in outcome.in_play}
    assert set(kept) == {"lesson", "error"}  # the knowledge item went, nothing else
    assert Knowledge.objects.get(pk=kept["error"]).workspace == empty
    assert Lesson.objects.get(pk=kept["lesson"]).workspace == empty
    lines = "\n".join(report.lines())
    assert "References dropped (target not in the export)" in lines
    assert "outcomes.in_play" in lines
    assert report.as_dict()["references_dropped"]["outcomes.in_play"] >= 1


def test_a_ledger_citation_of_an_outcome_outside_the_export_is_emptied(full, tmp_path):
    """``outcome:42`` must not come to name the new workspace's outcome 42."""
    path = tmp_path / "full.json"
    doc = json.loads(_export_to(full, path))
    changes = doc["sections"]["confidence_changes"]["records"]
    cited = [c for c in changes if c["evidence_id"].startswith("outcome:")]
    assert cited
    cited[0]["evidence_id"] = "outcome:999999999"
    path.write_text(json.dumps(doc))
    empty = WorkspaceFactory()
    report = export_import(workspace=empty, path=path, actor=ACTOR)
    assert report.dropped["confidence_changes.evidence_id"] == 1
    assert references_dangling(workspace=empty) == []


def test_it_refuses_a_workspace_with_data_and_writes_nothing(full, tmp_path):
    path = tmp_path / "full.json"
    _export_to(full, path)
    before = Outcome.objects.count()
    with pytest.raises(ApplicationError) as caught:
        export_import(workspace=full, path=path, actor=ACTOR)
    assert caught.value.code == "workspace_not_empty"
    assert "import only into an empty workspace" in caught.value.message
    assert Outcome.objects.count() == before


def test_it_refuses_unreadable_files(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{not json at all")
    with pytest.raises(ApplicationError) as caught:
        export_import(workspace=WorkspaceFactory(), path=path, actor=ACTOR)
    assert caught.value.fields == {"file": ["invalid"]}


def test_it_reports_progress(full, tmp_path):
    path = tmp_path / "full.json"
    doc = json.loads(_export_to(full, path))
    seen = []
    export_import(
        workspace=WorkspaceFactory(),
        path=path,
        actor=ACTOR,
        progress=lambda done, total: seen.append((done, total)),
    )
    total = sum(doc["counts"].values())
    assert seen[-1] == (total, total)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


# JSON columns of exported tables that hold no row ids (names, strings, session ids).
# A new JSON column must be declared in the map's ``refs`` or added here, on purpose.
JSON_WITHOUT_IDS = {
    ("memory.Outcome", "approach"),
    ("memory.Outcome", "checks"),
    ("memory.Knowledge", "metadata"),
    ("memory.SkillVersion", "permissions"),
    ("memory.SkillVersion", "tools"),
    ("memory.SkillVersion", "sections"),
    ("memory.AgentTool", "reads_facts"),
    ("memory.SkillDelta", "payload"),
    ("memory.SkillDelta", "findings"),
    ("memory.LearnedFact", "value"),
    ("memory.LearnedFact", "provenance"),
    ("memory.SituationLesson", "probe"),
    ("memory.Webhook", "events"),
}


def test_every_exported_json_column_is_declared_or_known_to_hold_no_ids():
    from django.db import models

    seen = set()
    for table in TABLES.values():
        if not table.export:
            continue
        for f in table.model._meta.concrete_fields:
            if isinstance(f, models.JSONField) and f.name not in table.export_exclude:
                seen.add((table.label, f.name))
                assert f.name in table.refs or (table.label, f.name) in JSON_WITHOUT_IDS, (
                    f"{table.label}.{f.name}: declare its ids in the datamap's refs "
                    "or list it in JSON_WITHOUT_IDS"
                )
    assert JSON_WITHOUT_IDS <= seen  # no stale entries
