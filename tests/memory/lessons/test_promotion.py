"""Lesson lifecycle rules through the API: promotion in two projects, demotion from a
third."""

from __future__ import annotations

import pytest

from memory.models import AuditEvent, Lesson, LessonScope, Outcome
from tests.factories.lessons import (
    BLOG,
    DOCS,
    SHOP,
    digest,
    failed_payload,
    fixed_payload,
    passed_payload,
)

pytestmark = pytest.mark.django_db
LESSON_TEXT = "Use `pytest .` instead of `pytest tests/` for tests."


def post(harness, body) -> dict:
    response = harness.post("/api/v1/outcomes/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def served(harness, remote) -> list[int]:
    body = harness.get("/api/v1/context/", {"project_remote": remote}).json()
    return [item["id"] for item in body["lessons"]]


def test_it_promotes_a_lesson_confirmed_in_two_projects_to_one_global_lesson(harness):
    shop = post(harness, fixed_payload("pytest:tests/", "pytest:.", project_remote=SHOP))
    shop_lesson = Lesson.objects.get(pk=shop["lessons_created"][0])
    assert shop_lesson.scope == LessonScope.PROJECT
    assert served(harness, DOCS) == []  # not leaked to other projects
    blog = post(harness, fixed_payload("pytest:tests/", "pytest:.", project_remote=BLOG))
    promoted = Lesson.objects.get(pk=blog["lessons_created"][0])
    assert promoted.scope == LessonScope.GLOBAL and promoted.project_digest == ""
    assert promoted.text == LESSON_TEXT
    sources = Lesson.objects.filter(superseded_by=promoted)
    assert {s.project_digest for s in sources} == {digest(SHOP), digest(BLOG)}
    assert {s.supersede_reason for s in sources} == {"promoted"}
    assert set(promoted.evidence.values_list("outcome_id", flat=True)) == {shop["id"], blog["id"]}
    detail = harness.get(f"/api/v1/lessons/{promoted.pk}/").json()
    assert sorted(detail["sources"]) == sorted(s.pk for s in sources)
    assert served(harness, DOCS) == [promoted.pk]  # global: served everywhere now
    event = AuditEvent.objects.get(action="lesson.promote")
    assert event.actor == "system:promotion" and event.target_id == str(promoted.pk)
    # The same lesson learned again anywhere confirms the global one.
    again = post(harness, fixed_payload("pytest:tests/", "pytest:.", project_remote=DOCS))
    assert again["lessons_created"] == []
    assert again["confirmed"] == [{"type": "lesson", "id": promoted.pk}]


def test_it_does_not_promote_on_two_confirmations_in_one_project(harness):
    post(harness, fixed_payload("pytest:tests/", "pytest:."))
    post(harness, fixed_payload("pytest:tests/", "pytest:."))
    assert not Lesson.objects.filter(scope=LessonScope.GLOBAL).exists()


def test_it_demotes_a_global_lesson_contradicted_from_a_third_project(harness):
    post(harness, fixed_payload("pytest:tests/", "pytest:.", project_remote=SHOP))
    blog = post(harness, fixed_payload("pytest:tests/", "pytest:.", project_remote=BLOG))
    promoted = Lesson.objects.get(pk=blog["lessons_created"][0])
    in_play = [{"type": "lesson", "id": promoted.pk}]
    # A contradiction from a project that confirmed it only costs confidence.
    own = post(harness, failed_payload(project_remote=SHOP, in_play=in_play))
    assert own["contradicted"] == [{"type": "lesson", "id": promoted.pk}]
    promoted.refresh_from_db()
    assert promoted.scope == LessonScope.GLOBAL and promoted.superseded_by is None
    # BLOG confirmed it last at promotion; now SHOP confirms it twice more (0.25 -> 0.55),
    # then a failure from DOCS, which never confirmed it, sends it back to SHOP.
    post(harness, passed_payload(project_remote=SHOP, in_play=in_play))
    post(harness, passed_payload(project_remote=SHOP, in_play=in_play))
    post(harness, failed_payload(project_remote=DOCS, in_play=in_play))
    promoted.refresh_from_db()
    assert promoted.supersede_reason == "demoted"
    demoted = promoted.superseded_by
    assert demoted.scope == LessonScope.PROJECT
    assert demoted.project_digest == digest(SHOP)
    assert demoted.confidence == pytest.approx(0.30)
    assert demoted.confidence == pytest.approx(promoted.confidence)
    assert served(harness, DOCS) == [] and served(harness, BLOG) == []
    assert served(harness, SHOP) == [demoted.pk]
    evidence_projects = set(
        Outcome.objects.filter(lesson_evidence__lesson=demoted).values_list(
            "project_digest", flat=True
        )
    )
    assert evidence_projects == {digest(SHOP)}
    assert AuditEvent.objects.get(action="lesson.demote").actor == "system:demotion"
