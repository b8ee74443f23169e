"""POST /api/v1/skills/, GET /api/v1/skills/{name}/, and isolation of the skills area."""

import pytest

from memory.core.text import normalise_whitespace
from memory.models import AuditEvent, Skill, SkillVersion
from tests.factories.skills import (
    TRIAGE_BODY,
    declare_tools,
    fact_body,
    harness_api,
    post_delta,
    preference,
    register,
    sha256,
    skill_md,
)

pytestmark = pytest.mark.django_db


def test_it_registers_a_skill_with_sections_and_digests(api):
    response = register(api)
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "triage-inbox"
    assert body["version"] == "1.0.0"
    assert body["digest"] == sha256(skill_md())
    assert [s["slug"] for s in body["sections"]] == [
        "triage-inbox",
        "escalation",
        "drafting-replies",
    ]
    assert [s["title"] for s in body["sections"]] == [
        "Triage inbox",
        "Escalation",
        "Drafting replies",
    ]
    escalation = (
        "## Escalation\nEscalate a thread when it has been waiting longer than the "
        "follow-up window\nwithout a reply.\n"
    )
    assert body["sections"][1]["digest"] == sha256(normalise_whitespace(escalation))
    assert body["body_digest"] == sha256(normalise_whitespace(TRIAGE_BODY))
    assert body["warnings"] == []
    assert AuditEvent.objects.filter(
        action="skill.register", actor=f"agent:{api.agent.name}"
    ).exists()


def test_an_identical_repost_is_idempotent(api):
    first = register(api)
    again = register(api)
    assert again.status_code == 200
    assert again.json() == first.json()
    assert SkillVersion.objects.count() == 1


def test_a_version_is_immutable(api):
    register(api)
    response = register(api, body=TRIAGE_BODY + "\nOne more line.\n")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "version_immutable"
    assert "version" in error["fields"]
    assert SkillVersion.objects.count() == 1


def test_duplicate_headings_get_numbered_slugs(api):
    body = "\n## Notes\none\n\n## Notes\ntwo\n\n## Notes\nthree\n\n## Ünïcode & Co.!\nx\n"
    response = register(api, body=body)
    assert [s["slug"] for s in response.json()["sections"]] == [
        "notes",
        "notes-2",
        "notes-3",
        "unicode-co",
    ]


def test_a_whitespace_only_edit_keeps_every_anchor_and_digest(api):
    first = register(api).json()
    spaced = TRIAGE_BODY.replace("\n\n", "\n\n\n").replace("Sort new", "Sort   new")
    second = register(api, version="1.0.1", body=spaced + "\n\n").json()
    assert second["sections"] == first["sections"]
    assert second["body_digest"] == first["body_digest"]
    assert second["digest"] != first["digest"]


def test_a_headingless_body_anchors_whole_body_with_a_warning(api):
    response = register(api, body="\nJust do the thing carefully.\n")
    body = response.json()
    assert response.status_code == 201
    assert [s["slug"] for s in body["sections"]] == ["body"]
    assert "orphan" in body["warnings"][0]


def test_headings_inside_code_fences_are_not_sections(api):
    body = "\n## Usage\n```sh\n# not a heading\n## nor this\n```\n\n## After\nok\n"
    response = register(api, body=body)
    assert [s["slug"] for s in response.json()["sections"]] == ["usage", "after"]


def test_a_missing_version_gets_a_content_address(api):
    response = register(api, version=None)
    assert response.status_code == 201
    assert response.json()["version"] == "sha-" + sha256(skill_md(version=None))[:12]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("no front matter\n", "skill_md"),
        ("---\nname: x\n", "skill_md"),
        ("---\nname: [unclosed\n---\nbody\n", "skill_md"),
        ("---\n- a list\n---\nbody\n", "skill_md"),
        ("---\ndescription: nameless\n---\nbody\n", "name"),
        ("---\nname: Not A Slug\n---\nbody\n", "name"),
        ("---\nname: ok\npermissions: network\n---\nbody\n", "permissions"),
        ("---\nname: ok\ntools: {a: b}\n---\nbody\n", "tools"),
        ("---\nname: ok\nversion: 'bad version'\n---\nbody\n", "version"),
        ("", "skill_md"),
    ],
)
def test_bad_skill_md_is_a_400_naming_the_field(api, text, field):
    response = api.post("/api/v1/skills/", {"skill_md": text}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert field in error["fields"]
    assert error["code"] == "invalid"
    assert Skill.objects.count() == 0


def test_bad_yaml_names_the_line(api):
    response = api.post(
        "/api/v1/skills/", {"skill_md": "---\nname: ok\ntools: [a\n---\nbody\n"}, format="json"
    )
    assert response.status_code == 400
    assert "YAML" in response.json()["error"]["message"]


def test_an_oversize_skill_md_is_refused(api, settings):
    settings.CAIRN_SKILL_MD_MAX_CHARS = 500
    response = register(api, body="\n## A\n" + "x" * 600 + "\n")
    assert response.status_code == 400
    assert "skill_md" in response.json()["error"]["fields"]


def test_skill_detail_shows_the_current_version(api):
    register(api)
    register(api, version="1.1.0", body=TRIAGE_BODY + "\n## Filing\nFile receipts.\n")
    body = api.get("/api/v1/skills/triage-inbox/").json()
    assert body["version"] == "1.1.0"
    assert body["permissions"] == ["network:imap"]
    assert body["tools"] == ["triage_inbox", "summarize_thread"]
    assert body["sections"][-1]["slug"] == "filing"


# --------------------------------------------------------------------------- isolation


def test_another_workspace_cannot_see_or_touch_a_skill(api, make_api):
    register(api)
    declare_tools(api)
    created = preference(api)
    assert created.status_code == 201
    api.put(
        "/api/v1/facts/priority_senders/alice@example.com/",
        fact_body(api, key="alice@example.com", value=True),
        format="json",
    )
    stranger = make_api()
    declare_tools(stranger)
    missing = stranger.get("/api/v1/skills/nope/")
    for response in (
        stranger.get("/api/v1/skills/triage-inbox/"),
        stranger.get("/api/v1/skills/triage-inbox/deltas/"),
        preference(stranger),
        stranger.get("/api/v1/skills/triage-inbox/effective/"),
        stranger.get("/api/v1/facts/priority_senders/alice@example.com/"),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    # Same answer as a skill that does not exist anywhere: nothing leaks.
    assert missing.status_code == 404
    assert stranger.get("/api/v1/facts/priority_senders/").json()["facts"] == []
    feedback = harness_api(stranger.agent).post(
        "/api/v1/feedback/",
        {
            "action_type": "triage",
            "scope": "skill:triage-inbox",
            "positive": True,
            "sample_id": "s-1",
            "delta_ids": [created.json()["id"]],
        },
        format="json",
    )
    assert feedback.status_code == 422
    assert feedback.json()["error"]["code"] == "unknown_delta"
    # The stranger registers its own skill of the same name: a separate row.
    assert register(stranger).status_code == 201
    assert Skill.objects.filter(name="triage-inbox").count() == 2
    assert stranger.get("/api/v1/skills/triage-inbox/deltas/").json() == {"deltas": []}
    assert (
        post_delta(
            stranger, kind="preference", anchor={"section": "escalation"}, payload={"body": "x y"}
        ).status_code
        == 201
    )
    assert len(api.get("/api/v1/skills/triage-inbox/deltas/").json()["deltas"]) == 1


def test_the_schema_documents_the_skills_endpoints(client):
    response = client.get("/api/v1/schema/", HTTP_ACCEPT="application/json")
    paths = response.json()["paths"]
    for path in (
        "/api/v1/skills/",
        "/api/v1/skills/{name}/deltas/",
        "/api/v1/skills/{name}/effective/",
        "/api/v1/agents/me/tools/",
        "/api/v1/feedback/",
        "/api/v1/facts/{namespace}/{key}/",
        "/api/v1/facts/{namespace}/",
    ):
        assert path in paths
    assert "422" in paths["/api/v1/skills/{name}/deltas/"]["post"]["responses"]
