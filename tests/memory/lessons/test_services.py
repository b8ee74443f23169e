"""Lesson lifecycle rules through the API: reversal, and never re-learning what a person
retired."""

from __future__ import annotations

import pytest

from memory.core.actors import Actor
from memory.lessons.lifecycle import lesson_restore, lesson_retire, lesson_text_normalize
from memory.lessons.mechanical import lesson_learn_mechanical
from memory.models import Lesson, LessonState, Outcome
from tests.factories.identity import person_actor
from tests.factories.lessons import (
    SHOP,
    fixed_payload,
)

pytestmark = pytest.mark.django_db


def post(harness, body) -> dict:
    response = harness.post("/api/v1/outcomes/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def served(harness, remote) -> list[int]:
    body = harness.get("/api/v1/context/", {"project_remote": remote}).json()
    return [item["id"] for item in body["lessons"]]


def test_it_normalises_equivalent_text():
    assert lesson_text_normalize("  Run  PYTEST, from the root!") == lesson_text_normalize(
        "run pytest from the root"
    )


def test_it_supersedes_a_lesson_when_a_passed_outcome_learns_the_reverse(harness):
    first = post(harness, fixed_payload("pytest:tests/", "pytest:."))
    old = Lesson.objects.get(pk=first["lessons_created"][0])
    reverse = post(harness, fixed_payload("pytest:.", "pytest:tests/"))
    new = Lesson.objects.get(pk=reverse["lessons_created"][0])
    old.refresh_from_db()
    assert (old.superseded_by_id, old.supersede_reason) == (new.pk, "reversed")
    assert served(harness, SHOP) == [new.pk]
    history = harness.get(f"/api/v1/lessons/{new.pk}/history/").json()
    assert [v["lesson"]["id"] for v in history["versions"]] == [old.pk, new.pk]


def test_it_keeps_a_sealed_lesson_when_the_reverse_is_learned(harness):
    first = post(harness, fixed_payload("pytest:tests/", "pytest:."))
    Lesson.objects.filter(pk=first["lessons_created"][0]).update(sealed=True)
    post(harness, fixed_payload("pytest:.", "pytest:tests/"))
    assert len(served(harness, SHOP)) == 2


def test_it_never_relearns_a_person_retired_lesson_from_the_same_outcome(harness):
    body = post(harness, fixed_payload("pytest:tests/", "pytest:."))
    lesson = Lesson.objects.get(pk=body["lessons_created"][0])
    lesson_retire(lesson=lesson, actor=person_actor("alice"), reason="misleading")
    outcome = Outcome.objects.get(pk=body["id"])
    assert (
        lesson_learn_mechanical(
            outcome=outcome, failed_op="pytest:tests/", ok_op="pytest:.", target="tests"
        )
        is None
    )
    assert Lesson.objects.filter(state=LessonState.ACTIVE).count() == 0
    # An agent's retirement does not carry that promise.
    body = post(harness, fixed_payload("npm:test", "npm:run-test"))
    lesson = Lesson.objects.get(pk=body["lessons_created"][0])
    lesson_retire(lesson=lesson, actor=Actor.for_agent(lesson.agent))
    learned = lesson_learn_mechanical(
        outcome=Outcome.objects.get(pk=body["id"]),
        failed_op="npm:test",
        ok_op="npm:run-test",
        target="tests",
    )
    assert learned is not None and learned[1] == "created"


def test_it_restores_a_retired_lesson_for_a_person(harness):
    body = post(harness, fixed_payload("pytest:tests/", "pytest:."))
    lesson = Lesson.objects.get(pk=body["lessons_created"][0])
    lesson_retire(lesson=lesson, actor=person_actor("alice"))
    restored = lesson_restore(lesson=lesson, actor=person_actor("alice"))
    assert (restored.state, restored.retired_by) == (LessonState.ACTIVE, "")
    assert served(harness, SHOP) == [lesson.pk]
