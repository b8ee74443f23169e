"""POST /api/v1/feedback/: trust-ledger samples attributed to deltas."""

import pytest

from memory.models import SkillDelta
from tests.factories.skills import preference

pytestmark = pytest.mark.django_db


def test_feedback_counts_attributed_deltas(ready):
    delta_id = preference(ready).json()["id"]
    for positive in (True, True, False):
        response = ready.post(
            "/api/v1/feedback/",
            {
                "action_type": "triage",
                "scope": "skill:triage-inbox",
                "positive": positive,
                "delta_ids": [delta_id],
            },
            format="json",
        )
        assert response.status_code == 201
    body = response.json()
    assert body["progress"]["samples"] == 3
    assert body["progress"]["positive"] == 2
    assert body["progress"]["message"] == "3 of 5 samples on scope 'skill:triage-inbox'"
    delta = SkillDelta.objects.get(pk=delta_id)
    assert (delta.attempt_count, delta.success_count) == (3, 2)


def test_feedback_validates_its_input(ready):
    for body, field in (
        ({"scope": "s", "positive": True}, "action_type"),
        ({"action_type": "a", "positive": True}, "scope"),
        ({"action_type": "a", "scope": "s"}, "positive"),
        ({"action_type": "a", "scope": "s", "positive": True, "delta_ids": ["x"]}, "delta_ids.0"),
    ):
        response = ready.post("/api/v1/feedback/", body, format="json")
        assert response.status_code == 400
        assert field in response.json()["error"]["fields"], response.json()
    unknown = ready.post(
        "/api/v1/feedback/",
        {"action_type": "a", "scope": "s", "positive": True, "delta_ids": [999999]},
        format="json",
    )
    assert unknown.status_code == 422
    assert unknown.json()["error"]["code"] == "unknown_delta"
