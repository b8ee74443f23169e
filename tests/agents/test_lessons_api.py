"""/api/v1/lessons/ end to end: create (claimed or with evidence), read, edit, retire,
history, list, and workspace isolation. The decision-time check is in test_context_api."""

from __future__ import annotations

import pytest

from memory.lessons.lifecycle import lesson_retire
from memory.models import AuditEvent, Lesson, LessonState, Outcome
from tests.factories.identity import person_actor
from tests.factories.lessons import (
    BLOG,
    SHOP,
    LessonFactory,
    failed_payload,
    outcome_payload,
    passed_payload,
)

URL = "/api/v1/lessons/"
TEXT = "Run pytest from the repository root, not from tests/."


def outcome(harness, body) -> int:
    response = harness.post("/api/v1/outcomes/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def create(harness, evidence=(), text=TEXT, op="pytest:.", remote=SHOP, **extra):
    body = {
        "text": text,
        "operation_key": op,
        "evidence": list(evidence),
        "project_remote": remote,
        **extra,
    }
    return harness.post(URL, body, format="json")


def context(harness, remote=SHOP):
    return harness.get("/api/v1/context/", {"project_remote": remote}).json()


# --- create ------------------------------------------------------------------------------------------


def test_it_stores_a_lesson_without_evidence_as_claimed_and_never_serves_it(harness):
    response = create(harness)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["state"], body["confidence"], body["evidence"]) == ("claimed", 0.3, [])
    assert body["source"] == "model"
    assert context(harness)["lessons"] == []
    check = harness.get(f"{URL}check/", {"operation_key": "pytest:.", "project_remote": SHOP})
    assert check.json()["lessons"] == []


def test_it_stores_a_lesson_with_passed_evidence_as_claimed_citing_it(harness):
    evidence = outcome(harness, passed_payload())
    body = create(harness, evidence=[evidence]).json()
    assert (body["state"], body["confidence"], body["evidence"], body["cited"]) == (
        "claimed",
        0.3,
        [],
        [evidence],
    )
    assert context(harness)["lessons"] == []
    outcome(harness, passed_payload(in_play=[{"type": "lesson", "id": body["id"]}]))
    assert [item["id"] for item in context(harness)["lessons"]] == [body["id"]]


def test_it_refuses_fabricated_evidence_naming_each_id_and_why(harness, make_api):
    ws = harness.agent.workspace
    good = outcome(harness, passed_payload())
    failed = outcome(harness, failed_payload())
    unverified = outcome(harness, outcome_payload())
    other_project = outcome(harness, passed_payload(project_remote=BLOG))
    stranger = make_api(scope="harness")
    foreign = outcome(stranger, passed_payload())
    missing = max(good, failed, unverified, other_project, foreign) + 1000
    response = create(harness, evidence=[good, missing, foreign, other_project, failed, unverified])
    assert response.status_code == 422, response.json()
    error = response.json()["error"]
    assert error["code"] == "evidence_refused"
    reasons = error["fields"]["evidence"]
    assert reasons == [
        f"{missing}: unknown (no such outcome in this workspace and project)",
        # Another workspace's outcome reads exactly like a missing one.
        f"{foreign}: unknown (no such outcome in this workspace and project)",
        f"{other_project}: unknown (no such outcome in this workspace and project)",
        f"{failed}: not_passed (failed)",
        f"{unverified}: not_passed (nothing was verified (passed=null))",
    ]
    assert str(missing) in error["message"]
    # No partial write: the good id did not sneak a lesson in.
    assert Lesson.objects.filter(workspace=ws).count() == 0


def test_it_refuses_to_post_a_global_lesson(harness):
    response = create(harness, scope="global")
    assert response.status_code == 422
    assert "scope" in response.json()["error"]["fields"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"text": "   "}, "text"),
        ({"text": "x" * 400}, "text"),
        ({"operation_key": ""}, "operation_key"),
        ({"evidence": ["twelve"]}, "evidence.0"),
        ({"source": "user"}, "source"),
        ({"project_remote": ""}, "project_remote"),
    ],
)
def test_it_refuses_bad_lessons_naming_the_field(harness, body, field):
    payload = {"text": TEXT, "operation_key": "pytest:.", "project_remote": SHOP, **body}
    response = harness.post(URL, payload, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["error"]["fields"]


def test_it_gives_new_evidence_to_an_equivalent_lesson_instead_of_duplicating(harness):
    first = create(harness, evidence=[outcome(harness, passed_payload())]).json()
    again = create(
        harness,
        evidence=[outcome(harness, passed_payload())],
        text="  run PYTEST from the repository root -- not from tests!  ",
    )
    assert again.status_code == 200
    assert again.json()["deduplicated_into"] == first["id"]
    # Kept as cited; saying it again with another outcome is not evidence.
    assert again.json()["confidence"] == pytest.approx(0.3)
    assert len(again.json()["cited"]) == 2
    assert Lesson.objects.count() == 1


def test_it_does_not_relearn_what_a_person_retired_from_the_same_evidence(harness):
    evidence = outcome(harness, passed_payload())
    lesson = Lesson.objects.get(pk=create(harness, evidence=[evidence]).json()["id"])
    lesson_retire(lesson=lesson, actor=person_actor("alice"), reason="wrong here")
    refused = create(harness, evidence=[evidence])
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "retired_by_person"
    # New evidence is new evidence.
    fresh = create(harness, evidence=[outcome(harness, passed_payload())])
    assert fresh.status_code == 201


# --- read, edit, retire, history ----------------------------------------------------------------------------


def test_it_reads_a_lesson_and_hides_other_workspaces(harness, make_api):
    mine = create(harness).json()
    assert harness.get(f"{URL}{mine['id']}/").json()["text"] == TEXT
    stranger = make_api(scope="harness")
    theirs = stranger.get(f"{URL}{mine['id']}/")
    missing = stranger.get(f"{URL}{mine['id'] + 999}/")
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["error"]["code"] == missing.json()["error"]["code"] == "not_found"


def test_it_edits_into_a_new_claimed_row_that_earns_its_own_evidence(harness):
    evidence = outcome(harness, passed_payload())
    old = create(harness, evidence=[evidence]).json()
    outcome(harness, passed_payload(in_play=[{"type": "lesson", "id": old["id"]}]))
    assert harness.get(f"{URL}{old['id']}/").json()["confidence"] == pytest.approx(0.65)
    response = harness.patch(
        f"{URL}{old['id']}/", {"text": "Run pytest at the root."}, format="json"
    )
    assert response.status_code == 200, response.json()
    new = response.json()
    assert new["id"] != old["id"] and new["previous_id"] == old["id"]
    assert new["text"] == "Run pytest at the root."
    # The old words' evidence and confidence stay with the old words.
    assert (new["state"], new["confidence"], new["evidence"], new["cited"]) == (
        "claimed",
        0.3,
        [],
        [],
    )
    old_now = harness.get(f"{URL}{old['id']}/").json()
    assert (old_now["superseded_by"], old_now["supersede_reason"]) == (new["id"], "edited")
    # Editing the old row again is refused with the id of the current one.
    again = harness.patch(f"{URL}{old['id']}/", {"text": "Something else."}, format="json")
    assert again.status_code == 422
    assert str(new["id"]) in again.json()["error"]["message"]


def test_it_retires_a_lesson_on_forget_and_stops_serving_it(harness):
    lesson = create(harness, evidence=[outcome(harness, passed_payload())]).json()
    response = harness.post(f"{URL}{lesson['id']}/retire/", {"reason": "obsolete"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert (body["state"], body["retired_by"], body["retired_reason"]) == (
        "retired",
        "agent",
        "obsolete",
    )
    assert context(harness)["lessons"] == []
    assert harness.post(f"{URL}{lesson['id']}/retire/", {}, format="json").status_code == 200
    assert Lesson.objects.filter(pk=lesson["id"]).exists()  # kept as history


def test_it_refuses_to_let_an_agent_edit_or_retire_a_sealed_lesson(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace, sealed=True)
    assert harness.post(f"{URL}{lesson.pk}/retire/", {}, format="json").status_code == 422
    patch = harness.patch(f"{URL}{lesson.pk}/", {"text": "Other."}, format="json")
    assert patch.status_code == 422
    lesson.refresh_from_db()
    assert lesson.state == LessonState.ACTIVE


def test_it_shows_the_supersede_chain_with_evidence_per_version(harness):
    first_evidence = outcome(harness, passed_payload())
    v1 = create(harness, evidence=[first_evidence]).json()
    v2 = harness.patch(
        f"{URL}{v1['id']}/", {"text": "Run pytest at the root."}, format="json"
    ).json()
    v3 = harness.patch(f"{URL}{v2['id']}/", {"text": "Run pytest from /."}, format="json").json()
    for lesson_id in (v1["id"], v2["id"], v3["id"]):
        history = harness.get(f"{URL}{lesson_id}/history/").json()
        assert history["id"] == v3["id"]
        assert [v["lesson"]["id"] for v in history["versions"]] == [v1["id"], v2["id"], v3["id"]]
        first, *edits = history["versions"]
        assert [(o["id"], o["relation"]) for o in first["outcomes"]] == [(first_evidence, "cited")]
        assert first["outcomes"][0]["passed"] is True
        # Edits from a token are new words: they start with no evidence of their own.
        assert all(version["outcomes"] == [] for version in edits)


def test_it_isolates_every_lesson_endpoint_by_workspace(harness, make_api):
    lesson = create(harness, evidence=[outcome(harness, passed_payload())]).json()
    stranger = make_api(scope="harness")
    base = f"{URL}{lesson['id']}/"
    assert stranger.get(base).status_code == 404
    assert stranger.patch(base, {"text": "Mine now."}, format="json").status_code == 404
    assert stranger.post(f"{base}retire/", {}, format="json").status_code == 404
    assert stranger.get(f"{base}history/").status_code == 404
    assert stranger.get(URL).json()["count"] == 0
    assert stranger.get("/api/v1/context/", {"project_remote": SHOP}).json()["lessons"] == []
    check = stranger.get(f"{URL}check/", {"operation_key": "pytest:.", "project_remote": SHOP})
    assert check.json()["lessons"] == []
    evidence = stranger.post(
        "/api/v1/evidence/",
        {
            "evidence_id": "e-1",
            "kind": "user_confirmed",
            "target_type": "lesson",
            "target_id": lesson["id"],
        },
        format="json",
    )
    assert evidence.status_code == 404
    assert Lesson.objects.get(pk=lesson["id"]).state == LessonState.CLAIMED
    assert Lesson.objects.get(pk=lesson["id"]).confidence == 0.3


# --- list -----------------------------------------------------------------------------------------------------


def test_it_lists_lessons_with_filters_and_pages(harness, django_assert_max_num_queries):
    ws = harness.agent.workspace
    LessonFactory.create_batch(3, workspace=ws)
    LessonFactory(workspace=ws, operation_key="npm:test", state=LessonState.CLAIMED)
    LessonFactory(workspace=ws, project_digest="f" * 64)
    LessonFactory()  # another workspace
    page = harness.get(URL, {"limit": 2}).json()
    assert page["count"] == 5 and len(page["results"]) == 2 and page["next"]
    assert harness.get(URL, {"state": "claimed"}).json()["count"] == 1
    assert harness.get(URL, {"operation_key": "npm:test"}).json()["count"] == 1
    assert harness.get(URL, {"project_remote": SHOP}).json()["count"] == 4
    assert harness.get(URL, {"state": "bogus"}).status_code == 400
    with django_assert_max_num_queries(8):
        assert len(harness.get(URL).json()["results"]) == 5


# --- audit, id range, credentials ------------------------------------------------------------------------------


def test_it_counts_audit_events_for_agent_actions(harness):
    lesson = create(harness).json()
    harness.post(f"{URL}{lesson['id']}/retire/", {}, format="json")
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"lesson.create", "lesson.retire"} <= actions
    assert Outcome.objects.count() == 0


def test_it_answers_404_for_ids_beyond_the_database_range(harness):
    huge = 10**30
    assert harness.get(f"{URL}{huge}/").status_code == 404
    assert harness.post(f"{URL}{huge}/retire/", {}, format="json").status_code == 404
    assert harness.get(f"{URL}{huge}/history/").status_code == 404


def test_a_lesson_holding_a_credential_is_refused_on_create_and_edit(harness):
    body = {
        "text": "Deploy with password: hunter2hunter2 on the staging box.",
        "operation_key": "deploy:staging",
        "project_remote": "https://github.com/acme/shop.git",
    }
    refused = harness.post("/api/v1/lessons/", body, format="json")
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "credential_refused"
    assert "text" in refused.json()["error"]["fields"]
    ok = harness.post(
        "/api/v1/lessons/",
        {**body, "text": "Deploy to staging with the vault's key."},
        format="json",
    )
    assert ok.status_code == 201, ok.content
    edit = harness.patch(
        f"/api/v1/lessons/{ok.json()['id']}/",
        {"text": "Use token ghp_abcdefghijklmnopqrstuvwxyz0123456789 to deploy."},
        format="json",
    )
    assert edit.status_code == 422
    assert edit.json()["error"]["code"] == "credential_refused"


def test_a_lesson_carries_the_agents_rationale_and_refuses_a_credential_in_it(api):
    body = {
        "text": "Run the migrations before the tests.",
        "operation_key": "pytest:.",
        "project_remote": "https://github.com/acme/shop.git",
    }
    refused = api.post(
        "/api/v1/lessons/",
        {**body, "rationale": "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 showed it"},
        format="json",
    )
    assert refused.status_code == 422
    assert refused.json()["error"]["fields"].keys() == {"rationale"}
    too_long = api.post("/api/v1/lessons/", {**body, "rationale": "x" * 401}, format="json")
    assert too_long.status_code == 400 and "rationale" in too_long.json()["error"]["fields"]
    ok = api.post(
        "/api/v1/lessons/",
        {**body, "rationale": "Three runs failed on a missing table."},
        format="json",
    )
    assert ok.status_code == 201, ok.content
    assert ok.json()["rationale"] == "Three runs failed on a missing table."
    assert api.get(f"/api/v1/lessons/{ok.json()['id']}/").json()["rationale"] == (
        "Three runs failed on a missing table."
    )
