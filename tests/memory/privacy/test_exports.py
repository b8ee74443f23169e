"""Export everything learned, and import it back into an empty workspace."""

import io
import json

import pytest

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.identity.services import token_issue
from memory.lessons.lifecycle import lesson_edit
from memory.lessons.outcomes import outcome_record
from memory.models import Knowledge, Lesson, LessonEvidence
from memory.privacy.exports import export_write
from memory.privacy.imports import export_import
from memory.privacy.references import InJson, json_remap
from memory.privacy.selection import EXPORT_SELECTORS, selector_parse
from tests.factories.identity import WorkspaceFactory
from tests.factories.lessons import check, step
from tests.factories.privacy import bundle, confirm_lesson, ready_agent, workspace_ready
from tests.factories.skills import backed

pytestmark = pytest.mark.django_db


def _export(workspace, fmt="json", **selector) -> str:
    out = io.StringIO()
    sel = selector_parse(workspace=workspace, data=selector, allowed=EXPORT_SELECTORS)
    export_write(workspace=workspace, selector=sel, out=out, fmt=fmt)
    return out.getvalue()


def _sections(text: str) -> tuple[dict, dict]:
    """(header, {section: records}) from either format."""
    if text.startswith('{"counts"') or '"type":"header"' not in text.splitlines()[0]:
        doc = json.loads(text)
        return doc, {name: body["records"] for name, body in doc["sections"].items()}
    lines = [json.loads(line) for line in text.splitlines()]
    header = lines[0]
    sections = {name: [] for name in header["schema"]}
    for line in lines[1:]:
        if line["type"] == "record":
            sections[line["section"]].append(line["record"])
    return header, sections


def normalised(text: str) -> dict:
    """The document with ids replaced by positions and timestamps dropped.

    References, ids inside JSON values included, are followed through the
    header's schema, so a reference still has to point at the same record (by
    position) to compare equal.
    """
    header, sections = _sections(text)
    schema = header["schema"]
    position = {
        name: {r["id"]: i for i, r in enumerate(sorted(records, key=lambda r: r["id"]))}
        for name, records in sections.items()
    }

    def ref(spec, value, record):
        if value is None:
            return None
        if "json" in spec:  # ids inside a JSON value, each followed to its record
            specs = tuple(
                InJson(tuple(j["path"]), j.get("section") or j["sections"], by=j.get("by"))
                for j in spec["json"]
            )
            return json_remap(specs, value, lambda name, pk: position[name].get(pk, "?"))[0]
        if isinstance(spec, str):
            if isinstance(value, list):
                return sorted(position[spec].get(v, "?") for v in value)
            return position[spec].get(value, "?")
        if "by" in spec:
            return position[spec["sections"][record[spec["by"]]]].get(value, "?")
        if isinstance(value, str) and value.startswith(spec["prefix"]):
            return spec["prefix"] + str(
                position[spec["section"]].get(int(value[len(spec["prefix"]) :]), "?")
            )
        return value

    out = {}
    for name, records in sections.items():
        refs = schema[name]["references"]
        rows = []
        for record in sorted(records, key=lambda r: r["id"]):
            row = {}
            for key, value in record.items():
                if key == "id" or key == "at" or key.endswith("_at"):
                    continue
                row[key] = ref(refs[key], value, record) if key in refs else value
            rows.append(row)
        out[name] = rows
    return {"counts": header["counts"], "sections": out}


@pytest.fixture
def rich(workspace):
    """Two agents' bundles, a lesson with two outcomes, an edited lesson, a superseded fact."""
    workspace_ready(workspace)
    a = ready_agent(workspace, "gaia/chat")
    b = ready_agent(workspace, "gaia/code")
    first = bundle(agent=a, name="alpha")
    second = bundle(agent=b, name="beta")
    confirm_lesson(
        agent=a,
        lesson_id=first.lessons[0],
        session="sess-x",
        outcome_id="x-1",
        project_remote=first.project_remote,
    )
    lesson_edit(
        lesson=Lesson.objects.get(pk=second.lessons[0]),
        text="Prefer uv in beta.",
        actor=Actor.system("test"),
    )
    from memory.skills.facts import fact_put

    fact_put(
        channel="agent",
        workspace=workspace,
        agent=a,
        namespace="priority_senders",
        key="alpha-lead",
        value="new-lead@alpha.example.com",
        provenance=backed(
            a,
            {"source": "user_instruction", "turns": ["sess-alpha#9"]},
            said="Alpha-lead is new-lead@alpha.example.com.",
        ),
    )
    token_issue(agent=a, scope="admin")
    return workspace


def test_it_round_trips_export_import_export(rich, tmp_path):
    original = _export(rich)
    path = tmp_path / "export.json"
    path.write_text(original)
    empty = WorkspaceFactory()
    report = export_import(workspace=empty, path=path, actor=Actor.system("test"))
    again = _export(empty)
    assert normalised(again) == normalised(original)
    assert report.rows["lessons"] == json.loads(original)["counts"]["lessons"]
    # Lineage and evidence links survived, pointing at the new rows.
    edited = Lesson.objects.get(workspace=empty, text="Prefer uv in beta.")
    assert Lesson.objects.filter(workspace=empty, superseded_by=edited).count() == 1
    assert (
        LessonEvidence.objects.filter(lesson__workspace=empty).count()
        == LessonEvidence.objects.filter(lesson__workspace=rich).count()
    )


def test_it_round_trips_through_jsonl(rich, tmp_path):
    original = _export(rich)
    path = tmp_path / "export.jsonl"
    path.write_text(_export(rich, fmt="jsonl"))
    empty = WorkspaceFactory()
    export_import(workspace=empty, path=path, actor=Actor.system("test"))
    assert normalised(_export(empty)) == normalised(original)


def test_it_writes_jsonl_one_record_per_line(rich):
    lines = _export(rich, fmt="jsonl").splitlines()
    header, end, signature = (json.loads(lines[i]) for i in (0, -2, -1))
    assert header["type"] == "header" and end["type"] == "end"
    assert signature["type"] == "signature" and signature["alg"] == "hmac-sha256"
    assert len(lines) == 3 + sum(header["counts"].values())


def test_it_leaves_out_secrets_vectors_and_paths(rich):
    agent = ready_agent(rich, "pathy")
    outcome_record(
        agent=agent,
        outcome_id="p-1",
        session_id="s",
        project_path="/home/alice/secret-project",
        approach=[step("pytest", "/home/alice/secret-project/tests/test_a.py", "ok", 1)],
        checks=[check(2, 0)],
        channel="harness",
    )
    text = _export(rich)
    from memory.models import ApiToken

    for token in ApiToken.objects.filter(workspace=rich):
        assert token.digest not in text
    assert "/home/alice" not in text
    assert '"embedding"' not in text and "search_vector" not in text
    assert "response_body" not in text  # idempotency replays are not exported
    doc = json.loads(text)
    assert "tests/test_a.py" in json.dumps(doc["sections"]["outcomes"])


def test_it_keeps_lineage_and_evidence_ids(rich):
    doc = json.loads(_export(rich))
    lessons = doc["sections"]["lessons"]["records"]
    ids = {r["id"] for r in lessons}
    superseded = [r for r in lessons if r["superseded_by"]]
    assert superseded and all(r["superseded_by"] in ids for r in superseded)
    links = doc["sections"]["lesson_evidence"]["records"]
    outcomes = {r["id"] for r in doc["sections"]["outcomes"]["records"]}
    assert links and all(link["lesson"] in ids and link["outcome"] in outcomes for link in links)


def test_it_exports_one_agent(rich):
    doc = json.loads(_export(rich, agent="gaia/code"))
    agents = {r["name"] for r in doc["sections"]["agents"]["records"]}
    assert agents == {"gaia/code"}
    content = json.dumps(doc["sections"])
    assert "beta" in content and "alpha" not in content


def test_it_exports_one_project(rich):
    doc = json.loads(_export(rich, project_remote="https://github.com/acme/alpha.git"))
    outcomes = doc["sections"]["outcomes"]["records"]
    assert outcomes and {o["project_digest"] for o in outcomes} == {outcomes[0]["project_digest"]}
    assert doc["sections"]["knowledge"]["records"] == []
    assert doc["sections"]["lessons"]["records"]
    assert doc["selector"]["kind"] == "project"
    assert "alpha.git" not in json.dumps(doc)  # the remote is kept as its digest only


def test_it_exports_one_skill(rich):
    doc = json.loads(_export(rich, skill="triage-inbox"))
    assert [s["name"] for s in doc["sections"]["skills"]["records"]] == ["triage-inbox"]
    assert len(doc["sections"]["skill_deltas"]["records"]) == 2
    assert doc["sections"]["skill_versions"]["records"]
    assert doc["sections"]["knowledge"]["records"] == []


def test_it_imports_only_into_an_empty_workspace(rich, tmp_path):
    path = tmp_path / "export.json"
    path.write_text(_export(rich))
    with pytest.raises(ApplicationError) as caught:
        export_import(workspace=rich, path=path, actor=Actor.system("test"))
    assert caught.value.code == "workspace_not_empty"


def test_it_refuses_a_file_that_is_not_an_export(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(ApplicationError):
        export_import(workspace=WorkspaceFactory(), path=path, actor=Actor.system("test"))


def test_it_recomputes_embeddings_on_import(workspace, tmp_path):
    from memory.core.embeddings import get_embedder

    item = Knowledge.objects.create(workspace=workspace, content="The office is in Lyon.")
    item.embedding = get_embedder().embed_one(item.content)
    item.embedding_model = get_embedder().model_id
    item.save()
    path = tmp_path / "e.json"
    path.write_text(_export(workspace))
    empty = WorkspaceFactory()
    export_import(workspace=empty, path=path, actor=Actor.system("test"))
    copy = Knowledge.objects.get(workspace=empty)
    assert copy.embedding is not None and copy.embedding_model == item.embedding_model


def test_it_carries_stored_goal_texts_with_their_outcomes(rich):
    doc = json.loads(_export(rich, agent="gaia/chat"))
    goals = {o["goal_text"] for o in doc["sections"]["outcomes"]["records"]}
    assert "Get the alpha dependencies installed" in goals
