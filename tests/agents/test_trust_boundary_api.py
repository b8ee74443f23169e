"""The trust boundary, attacked with nothing but an agent token (issue: laundering,
minted person evidence, edits that carry confidence, self-graded outcomes, ties).

Each test replays one attack through the API and fails if the hole comes back;
the harness token next to it shows the same request counting when it should.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from memory.models import (
    ConfidenceChange,
    Evidence,
    Lesson,
    LessonEvidence,
    LessonState,
    Outcome,
)
from tests.factories.lessons import (
    SHOP,
    check,
    fixed_payload,
    outcome_payload,
    passed_payload,
    step,
)

OUTCOMES = "/api/v1/outcomes/"
LESSONS = "/api/v1/lessons/"
EVIDENCE = "/api/v1/evidence/"


def _outcome(client, body) -> dict:
    response = client.post(OUTCOMES, body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def _claim(api, text="Run pytest from the repository root.", op="pytest:.", evidence=()):
    return api.post(
        LESSONS,
        {
            "text": text,
            "operation_key": op,
            "project_remote": SHOP,
            "evidence": list(evidence),
        },
        format="json",
    )


def _served(api) -> list[int]:
    body = api.get(f"/api/v1/context/?project_remote={SHOP}").json()
    return [lesson["id"] for lesson in body["lessons"]]


# --- laundering: evidence that never ran the lesson's operation --------------------------------


def test_a_passed_outcome_that_never_ran_the_operation_is_not_evidence(api, harness):
    unrelated = _outcome(harness, passed_payload(op="web:fetch", target="docs"))
    for _ in range(3):  # re-posting the same text with "more evidence" used to add +0.15 each
        refused = _claim(api, evidence=[unrelated["id"]])
        assert refused.status_code == 422, refused.json()
        error = refused.json()["error"]
        assert error["code"] == "evidence_refused"
        assert any("operation_not_run" in why for why in error["fields"]["evidence"])
    assert not Lesson.objects.filter(workspace=api.agent.workspace).exists()
    assert _served(api) == []


def test_an_agent_reported_outcome_is_not_evidence(api, harness):
    own_word = _outcome(api, passed_payload())
    assert own_word["evidence"] == "self_report"
    refused = _claim(api, evidence=[own_word["id"]])
    assert refused.status_code == 422
    assert any("agent_reported" in why for why in refused.json()["error"]["fields"]["evidence"])


def test_every_bad_id_is_named_with_its_reason(api, harness, make_api):
    ran = _outcome(harness, passed_payload())
    failed = _outcome(harness, outcome_payload(approach=[step("pytest:.")], checks=[check(2, 1)]))
    own_word = _outcome(api, passed_payload())
    elsewhere = _outcome(make_api(scope="harness"), passed_payload())
    refused = _claim(api, evidence=[ran["id"], failed["id"], own_word["id"], elsewhere["id"]])
    assert refused.status_code == 422
    reasons = refused.json()["error"]["fields"]["evidence"]
    assert [why.split(":")[0] for why in reasons] == [
        str(failed["id"]),
        str(own_word["id"]),
        str(elsewhere["id"]),
    ]
    assert "not_passed" in reasons[0]
    assert "agent_reported" in reasons[1]
    assert "unknown" in reasons[2]


def test_cited_evidence_is_kept_and_counts_once_the_lesson_was_in_play(api, harness):
    ran = _outcome(harness, passed_payload())
    created = _claim(api, evidence=[ran["id"]])
    assert created.status_code == 201, created.json()
    lesson = Lesson.objects.get(pk=created.json()["id"])
    # Kept (shown on the lesson), weighed by nothing until the lesson is in play.
    assert (lesson.state, lesson.confidence) == (LessonState.CLAIMED, 0.3)
    assert list(LessonEvidence.objects.filter(lesson=lesson).values_list("relation", flat=True))
    assert lesson.pk not in _served(api)
    confirmed = _outcome(harness, passed_payload(in_play=[{"type": "lesson", "id": lesson.pk}]))
    assert {"type": "lesson", "id": lesson.pk} in confirmed["confirmed"]
    lesson.refresh_from_db()
    # +0.15 for the outcome it was in play for, and the cited evidence counts once (+0.2).
    assert lesson.state == LessonState.ACTIVE
    assert lesson.confidence == pytest.approx(0.65)
    assert lesson.pk in _served(api)


# --- minted person evidence ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["user_confirmed", "diff_accepted"])
def test_an_agent_token_cannot_mint_person_evidence(api, kind):
    claimed = _claim(api).json()
    assert claimed["state"] == "claimed"
    for n in range(8):  # eight posts once took a claimed lesson to 0.95 and active
        response = api.post(
            EVIDENCE,
            {
                "evidence_id": f"minted-{kind}-{n}",
                "kind": kind,
                "target_type": "lesson",
                "target_id": claimed["id"],
            },
            format="json",
        )
        assert response.status_code == 403, response.json()
        error = response.json()["error"]
        assert error["code"] == "harness_scope_required"
        assert "harness" in error["fields"]["kind"][0]
    lesson = Lesson.objects.get(pk=claimed["id"])
    assert (lesson.state, lesson.confidence) == (LessonState.CLAIMED, 0.3)
    assert not Evidence.objects.filter(target_id=lesson.pk).exists()
    assert claimed["id"] not in _served(api)


def test_the_harness_may_report_a_persons_confirmation(api, harness):
    claimed = _claim(api).json()
    response = harness.post(
        EVIDENCE,
        {
            "evidence_id": "review-1",
            "kind": "user_confirmed",
            "target_type": "lesson",
            "target_id": claimed["id"],
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["channel"] == "harness"
    lesson = Lesson.objects.get(pk=claimed["id"])
    assert lesson.state == LessonState.ACTIVE
    assert lesson.confidence == pytest.approx(0.45)
    change = ConfidenceChange.objects.get(target_type="lesson", target_id=lesson.pk)
    assert change.channel == "harness"


def test_self_report_from_an_agent_changes_no_confidence(api):
    claimed = _claim(api).json()
    response = api.post(
        EVIDENCE,
        {
            "evidence_id": "mine",
            "kind": "self_report",
            "target_type": "lesson",
            "target_id": claimed["id"],
        },
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["counted_as"] == "self_report"
    lesson = Lesson.objects.get(pk=claimed["id"])
    assert (lesson.state, lesson.confidence) == (LessonState.CLAIMED, 0.3)


# --- edits that carry confidence to another operation -------------------------------------------


def test_an_edit_cannot_move_a_lesson_to_another_operation(api, harness):
    ran = _outcome(harness, passed_payload())
    lesson_id = _claim(api, evidence=[ran["id"]]).json()["id"]
    response = api.patch(
        f"{LESSONS}{lesson_id}/",
        {"text": "Run rm -rf on the build dir.", "operation_key": "shell:rm"},
        format="json",
    )
    assert response.status_code == 422, response.json()
    error = response.json()["error"]
    assert error["code"] == "operation_change"
    assert "operation_key" in error["fields"]
    lesson = Lesson.objects.get(pk=lesson_id)
    assert (lesson.operation_key, lesson.superseded_by_id) == ("pytest:.", None)
    assert not Lesson.objects.filter(operation_key="shell:rm").exists()


# --- outcomes: the model's word is shown, never weighed -----------------------------------------


def test_an_agent_outcome_moves_no_confidence_and_learns_only_claims(api, harness):
    ran = _outcome(harness, passed_payload())
    lesson_id = _claim(api, evidence=[ran["id"]]).json()["id"]
    before = Lesson.objects.get(pk=lesson_id).confidence
    body = _outcome(api, passed_payload(in_play=[{"type": "lesson", "id": lesson_id}]))
    assert (body["channel"], body["evidence"], body["confirmed"]) == ("agent", "self_report", [])
    assert "agent token" in body["hint"]
    assert Lesson.objects.get(pk=lesson_id).confidence == before
    assert LessonEvidence.objects.filter(lesson_id=lesson_id).count() == 1
    learned = _outcome(api, fixed_payload("pip:install", "uv:pip-install"))
    [claimed_id] = learned["lessons_created"]
    claimed = Lesson.objects.get(pk=claimed_id)
    assert (claimed.state, claimed.confidence) == (LessonState.CLAIMED, 0.3)
    assert claimed_id not in _served(api)
    assert not ConfidenceChange.objects.filter(channel="agent").exists()


def test_the_harness_confirms_what_the_agent_only_claimed(api, harness):
    claimed_id = _outcome(api, fixed_payload("pip:install", "uv:pip-install"))["lessons_created"][0]
    again = _outcome(harness, fixed_payload("pip:install", "uv:pip-install"))
    assert again["lessons_created"] == []
    assert {"type": "lesson", "id": claimed_id} in again["confirmed"]
    lesson = Lesson.objects.get(pk=claimed_id)
    assert lesson.state == LessonState.ACTIVE
    assert claimed_id in _served(api)


def test_two_runs_of_one_check_at_the_same_step_fail_the_turn(harness):
    body = _outcome(
        harness,
        outcome_payload(approach=[step("pytest:.")], checks=[check(2, 1), check(2, 0)]),
    )
    assert body["passed"] is False
    body = _outcome(
        harness,
        outcome_payload(approach=[step("pytest:.")], checks=[check(2, 0), check(2, 1)]),
    )
    assert body["passed"] is False


# --- one live lesson per (scope, project, operation, text), even when racing -------------------


@pytest.mark.django_db(transaction=True)
def test_identical_outcomes_posted_at_once_make_one_live_lesson(make_api, workspace):
    clients = [make_api(workspace=workspace, scope="harness") for _ in range(4)]

    def post(client):
        return client.post(
            OUTCOMES, fixed_payload("pip:install", "uv:pip-install"), format="json"
        ).status_code

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert sorted(pool.map(post, clients)) == [201] * 4
    live = Lesson.objects.filter(
        workspace=workspace, superseded_by__isnull=True, operation_key="uv:pip-install"
    ).exclude(state=LessonState.RETIRED)
    assert live.count() == 1
    assert LessonEvidence.objects.filter(lesson=live.get()).count() == 4
    assert Outcome.objects.filter(workspace=workspace).count() == 4


# --- an agent token uses every memory feature and never moves a confidence ---------------------


def test_an_agent_token_uses_memory_without_moving_anything(api, harness):
    item = api.post(
        "/api/v1/knowledge/",
        {"content": "Staging listens on port 6543.", "category": "fact"},
        format="json",
    )
    assert item.status_code == 201
    assert api.post("/api/v1/recall/", {"query": "staging port"}, format="json").status_code == 200
    claimed = _claim(api).json()
    assert (
        api.get(f"/api/v1/lessons/check/?operation_key=pytest:.&project_remote={SHOP}").status_code
        == 200
    )
    _outcome(
        api,
        passed_payload(
            in_play=[
                {"type": "lesson", "id": claimed["id"]},
                {"type": "knowledge", "id": item.json()["id"]},
            ]
        ),
    )
    api.post(
        EVIDENCE,
        {
            "evidence_id": "x",
            "kind": "user_confirmed",
            "target_type": "knowledge",
            "target_id": item.json()["id"],
        },
        format="json",
    )
    assert not ConfidenceChange.objects.filter(workspace=api.agent.workspace).exists()
    assert Lesson.objects.get(pk=claimed["id"]).state == LessonState.CLAIMED


def test_every_record_says_which_channel_wrote_it(api, harness):
    from memory.models import ConversationTurn, Knowledge, ToolCall

    said = api.post(
        "/api/v1/knowledge/", {"content": "Builds use Node 20.", "category": "fact"}, format="json"
    )
    seen = harness.post(
        "/api/v1/knowledge/",
        {"content": "CI runs on Debian 12.", "category": "fact"},
        format="json",
    )
    assert Knowledge.objects.get(pk=said.json()["id"]).channel == "agent"
    assert Knowledge.objects.get(pk=seen.json()["id"]).channel == "harness"
    lesson = _claim(api).json()
    assert Lesson.objects.get(pk=lesson["id"]).channel == "agent"
    turn = {"role": "user", "content": "Please fix the cart.", "turn_index": 0}
    harness.post("/api/v1/sessions/s-1/turns/", turn, format="json")
    api.post("/api/v1/sessions/s-2/turns/", turn, format="json")
    assert dict(ConversationTurn.objects.values_list("session_id", "channel")) == {
        "s-1": "harness",
        "s-2": "agent",
    }
    calls = {
        "calls": [{"session_id": "s-1", "tool": "shell", "operation_key": "npm:ci", "ok": True}]
    }
    harness.post("/api/v1/tool-calls/", calls, format="json")
    assert ToolCall.objects.get().channel == "harness"
    learned = _outcome(harness, fixed_payload("pip:install", "uv:pip-install"))
    assert Lesson.objects.get(pk=learned["lessons_created"][0]).channel == "harness"
