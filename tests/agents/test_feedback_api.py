"""The delta track record (rule 5 of the trust boundary): POST /api/v1/feedback/
needs the harness and a sample id, and the deltas in play in a harness outcome are
scored from the outcome, once."""

import pytest

from memory.models import AuditEvent, FeedbackSample, SkillDelta
from tests.factories.lessons import failed_payload, outcome_payload, passed_payload
from tests.factories.skills import harness_api, preference

pytestmark = pytest.mark.django_db


@pytest.fixture
def harness(ready):
    return harness_api(ready.agent)


def _sample(client, positive=True, sample_id="h-1", **extra):
    return client.post(
        "/api/v1/feedback/",
        {
            "action_type": "triage",
            "scope": "skill:triage-inbox",
            "positive": positive,
            "sample_id": sample_id,
            **extra,
        },
        format="json",
    )


def test_feedback_counts_attributed_deltas(ready, harness):
    delta_id = preference(ready).json()["id"]
    for n, positive in enumerate((True, True, False)):
        response = _sample(harness, positive, f"h-{n}", delta_ids=[delta_id])
        assert response.status_code == 201
    body = response.json()
    assert body["sample_id"] == "h-2"
    assert body["progress"]["samples"] == 3
    assert body["progress"]["positive"] == 2
    assert body["progress"]["message"] == "3 of 5 samples on scope 'skill:triage-inbox'"
    delta = SkillDelta.objects.get(pk=delta_id)
    assert (delta.attempt_count, delta.success_count) == (3, 2)
    assert AuditEvent.objects.filter(action="feedback.record").count() == 3


def test_the_agent_token_may_not_grade_its_own_deltas(ready):
    delta_id = preference(ready).json()["id"]
    for n in range(6):
        response = _sample(ready, True, f"self-{n}", delta_ids=[delta_id])
        assert response.status_code == 403
        error = response.json()["error"]
        assert error["code"] == "forbidden_scope"
        assert "harness" in error["message"]
    assert not FeedbackSample.objects.exists()
    delta = SkillDelta.objects.get(pk=delta_id)
    assert (delta.attempt_count, delta.success_count) == (0, 0)


def test_a_retried_sample_counts_once_and_answers_the_stored_sample(ready, harness):
    delta_id = preference(ready).json()["id"]
    first = _sample(harness, True, "obs-42", delta_ids=[delta_id])
    assert first.status_code == 201
    for _ in range(3):
        again = _sample(harness, True, "obs-42", delta_ids=[delta_id])
        assert again.status_code == 200
        assert again.json()["id"] == first.json()["id"]
    # Even a retry claiming another verdict changes nothing.
    flipped = _sample(harness, False, "obs-42", delta_ids=[delta_id])
    assert flipped.json()["positive"] is True
    assert FeedbackSample.objects.count() == 1
    delta = SkillDelta.objects.get(pk=delta_id)
    assert (delta.attempt_count, delta.success_count) == (1, 1)


def test_feedback_validates_its_input(ready, harness):
    for body, field in (
        ({"scope": "s", "positive": True, "sample_id": "x"}, "action_type"),
        ({"action_type": "a", "positive": True, "sample_id": "x"}, "scope"),
        ({"action_type": "a", "scope": "s", "sample_id": "x"}, "positive"),
        ({"action_type": "a", "scope": "s", "positive": True}, "sample_id"),
        (
            {
                "action_type": "a",
                "scope": "s",
                "positive": True,
                "sample_id": "x",
                "delta_ids": ["x"],
            },
            "delta_ids.0",
        ),
        (
            {"action_type": "a", "scope": "s", "positive": True, "sample_id": "outcome:1"},
            "sample_id",
        ),
    ):
        response = harness.post("/api/v1/feedback/", body, format="json")
        assert response.status_code == 400
        assert field in response.json()["error"]["fields"], response.json()
    unknown = _sample(harness, delta_ids=[999999])
    assert unknown.status_code == 422
    assert unknown.json()["error"]["code"] == "unknown_delta"
    assert not FeedbackSample.objects.exists()


# --------------------------------------------------------------------------- outcome samples


def _in_play(*ids):
    return [{"type": "delta", "id": pk} for pk in ids]


def test_a_harness_outcome_scores_its_in_play_deltas_once(ready, harness):
    first = preference(ready).json()["id"]
    second = preference(ready, "Escalate legal threads the same day.").json()["id"]
    payload = passed_payload(in_play=_in_play(first, second))
    response = harness.post("/api/v1/outcomes/", payload, format="json")
    assert response.status_code == 201
    outcome_pk = response.json()["id"]
    sample = FeedbackSample.objects.get()
    assert sample.outcome_id == outcome_pk
    assert sample.sample_id == f"outcome:{outcome_pk}:delta:{first}"
    assert sample.positive is True
    assert sample.delta_ids == [first, second]
    assert sample.scope == "skill:triage-inbox"
    for pk in (first, second):
        delta = SkillDelta.objects.get(pk=pk)
        assert (delta.attempt_count, delta.success_count) == (1, 1)
    # A retry of the same outcome adds nothing.
    assert harness.post("/api/v1/outcomes/", payload, format="json").status_code == 200
    assert FeedbackSample.objects.count() == 1
    assert SkillDelta.objects.get(pk=first).attempt_count == 1


def test_a_failed_harness_outcome_is_a_negative_sample(ready, harness):
    delta_id = preference(ready).json()["id"]
    harness.post("/api/v1/outcomes/", failed_payload(in_play=_in_play(delta_id)), format="json")
    sample = FeedbackSample.objects.get()
    assert sample.positive is False
    delta = SkillDelta.objects.get(pk=delta_id)
    assert (delta.attempt_count, delta.success_count) == (1, 0)


def test_no_verdict_and_agent_outcomes_score_nothing(ready, harness):
    delta_id = preference(ready).json()["id"]
    # passed is null: no checks ran.
    harness.post("/api/v1/outcomes/", outcome_payload(in_play=_in_play(delta_id)), format="json")
    # The model's own word, passed or failed.
    ready.post("/api/v1/outcomes/", passed_payload(in_play=_in_play(delta_id)), format="json")
    ready.post("/api/v1/outcomes/", failed_payload(in_play=_in_play(delta_id)), format="json")
    assert not FeedbackSample.objects.exists()
    delta = SkillDelta.objects.get(pk=delta_id)
    assert (delta.attempt_count, delta.success_count) == (0, 0)


def test_an_outcome_scores_only_this_agents_deltas(ready, harness, make_api):
    other = make_api(workspace=ready.agent.workspace)
    from tests.factories.skills import declare_tools

    declare_tools(other)
    theirs = preference(other).json()["id"]
    harness.post("/api/v1/outcomes/", passed_payload(in_play=_in_play(theirs)), format="json")
    assert not FeedbackSample.objects.exists()
    assert SkillDelta.objects.get(pk=theirs).attempt_count == 0


def test_five_passed_harness_outcomes_meet_the_ledger_bar(ready, harness):
    delta_id = preference(ready).json()["id"]
    for _ in range(5):
        payload = passed_payload(in_play=_in_play(delta_id))
        assert harness.post("/api/v1/outcomes/", payload, format="json").status_code == 201
    progress = _sample(harness, True, "last").json()["progress"]
    assert progress["samples"] == 6
    assert progress["met"] is True
