"""POST /api/v1/evidence/: outside evidence about a lesson or knowledge item.

Another workspace's lesson answering 404 is covered with the other lesson
endpoints in test_lessons_api.
"""

import pytest

from memory.models import Evidence, Lesson
from tests.factories.lessons import KnowledgeFactory, LessonFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/evidence/"


def post(harness, target, kind="user_confirmed", evidence_id="review-1", target_type="lesson"):
    body = {
        "evidence_id": evidence_id,
        "kind": kind,
        "target_type": target_type,
        "target_id": target.pk,
    }
    return harness.post(URL, body, format="json")


def test_a_confirmation_raises_a_lessons_confidence_once(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace)
    response = post(harness, lesson)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["evidence_id"], body["kind"], body["target_id"]) == (
        "review-1",
        "user_confirmed",
        lesson.pk,
    )
    assert body["confidence_before"] == pytest.approx(0.5)
    assert body["confidence_after"] == pytest.approx(0.65)
    assert body["state"] == "active"
    retry = post(harness, lesson)
    assert retry.status_code == 200
    assert retry.json() == body
    assert Evidence.objects.count() == 1
    assert Lesson.objects.get(pk=lesson.pk).confidence == pytest.approx(0.65)


def test_a_self_report_is_recorded_and_worth_zero(harness):
    item = KnowledgeFactory(workspace=harness.agent.workspace)
    response = post(harness, item, kind="self_report", target_type="knowledge")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["confidence_after"] == body["confidence_before"]
    assert body["state"] is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"kind": "test_passed"}, "kind"),
        ({"target_type": "delta"}, "target_type"),
        ({"target_id": 0}, "target_id"),
        ({"evidence_id": ""}, "evidence_id"),
    ],
)
def test_it_refuses_bad_input_naming_the_field(harness, change, field):
    lesson = LessonFactory(workspace=harness.agent.workspace)
    body = {
        "evidence_id": "review-2",
        "kind": "diff_accepted",
        "target_type": "lesson",
        "target_id": lesson.pk,
        **change,
    }
    response = harness.post(URL, body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["error"]["fields"]
    assert not Evidence.objects.exists()


def test_an_unknown_target_is_a_404(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace)
    response = harness.post(
        URL,
        {
            "evidence_id": "review-3",
            "kind": "diff_accepted",
            "target_type": "lesson",
            "target_id": lesson.pk + 1000,
        },
        format="json",
    )
    assert response.status_code == 404
    assert not Evidence.objects.exists()
