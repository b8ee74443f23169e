"""A harness outcome that confirms a lesson already at its ceiling writes nothing to
the lesson (only its own row and the evidence link), so it takes no lock on it and
does not queue behind other outcomes holding it; one that moves the lesson still
locks it for its whole transaction."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import OperationalError

from memory.lessons.outcomes import outcome_record
from memory.models import Channel, ConfidenceChange, Lesson, LessonEvidence, Outcome
from tests.factories.lessons import SHOP, LessonFactory, check, step
from tests.memory.lessons.test_outcome_recency import _row_held

pytestmark = pytest.mark.django_db(transaction=True)
CEILING = settings.CAIRN_LESSON_CONFIDENCE_MAX


def _held_by_another_outcome(lesson_id: int):
    """A second connection holds the lesson's row as a harness outcome moving it does
    (``FOR NO KEY UPDATE``, until its commit); this one waits 300 ms at most."""
    return _row_held(lesson_id, lock="FOR NO KEY UPDATE", timeout_ms=300)


def _confirm(agent, lesson, outcome_id):
    return outcome_record(
        agent=agent,
        outcome_id=outcome_id,
        session_id="s",
        project_remote=SHOP,
        approach=[step("pytest", "tests", "ok", 1)],
        checks=[check(1, 0)],
        in_play=[{"type": "lesson", "id": lesson.pk}],
        channel=Channel.HARNESS,
    )


def test_a_confirmation_at_the_ceiling_does_not_wait_for_the_lesson(agent):
    lesson = LessonFactory(workspace=agent.workspace, operation_key="pytest", confidence=CEILING)
    with _held_by_another_outcome(lesson.pk):
        body, created = _confirm(agent, lesson, "quiet")
    assert created and body["confirmed"] == [{"type": "lesson", "id": lesson.pk}]
    outcome = Outcome.objects.get(outcome_id="quiet")
    assert outcome.response == body
    assert LessonEvidence.objects.filter(lesson=lesson, outcome=outcome).count() == 1
    assert not ConfidenceChange.objects.exists()
    assert Lesson.objects.get(pk=lesson.pk).confidence == CEILING


def test_a_confirmation_that_moves_the_lesson_waits_for_it(agent):
    lesson = LessonFactory(workspace=agent.workspace, operation_key="pytest", confidence=0.5)
    with _held_by_another_outcome(lesson.pk), pytest.raises(OperationalError):
        _confirm(agent, lesson, "moving")
    assert not Outcome.objects.filter(outcome_id="moving").exists()  # nothing half-done
    body, created = _confirm(agent, lesson, "moving")  # once the row is free
    assert created and body["confirmed"] == [{"type": "lesson", "id": lesson.pk}]
    assert Lesson.objects.get(pk=lesson.pk).confidence > 0.5
    assert ConfidenceChange.objects.filter(evidence_id=f"outcome:{body['id']}").count() == 1


@pytest.mark.parametrize(
    "state, twin",
    [("claimed", False), ("active", True)],
    ids=["a claimed lesson is activated", "a twin elsewhere may promote it"],
)
def test_a_confirmation_at_the_ceiling_that_changes_the_lesson_still_locks_it(agent, state, twin):
    lesson = LessonFactory(
        workspace=agent.workspace, operation_key="pytest", confidence=CEILING, state=state
    )
    if twin:
        LessonFactory(
            workspace=agent.workspace,
            operation_key="pytest",
            text=lesson.text,
            normalized_text=lesson.normalized_text,
            project_digest="0" * 64,
        )
    with _held_by_another_outcome(lesson.pk), pytest.raises(OperationalError):
        _confirm(agent, lesson, "not-quiet")


def test_a_lesson_erased_between_the_read_and_the_insert_costs_no_500(agent, monkeypatch):
    """Read without a lock, a quiet outcome's lesson can be erased before its evidence
    link is written (the link's foreign key then fails): it is recorded by the locked
    path instead, which finds the lesson gone."""
    from memory.lessons import outcomes

    lesson = LessonFactory(workspace=agent.workspace, operation_key="pytest", confidence=CEILING)
    decided = []

    def quiet_then_erased(**kwargs):
        decided.append(real(**kwargs))
        Lesson.objects.filter(pk=lesson.pk).delete()  # an erasure, committed meanwhile
        return decided[-1]

    real = outcomes._quiet
    monkeypatch.setattr(outcomes, "_quiet", quiet_then_erased)
    body, created = _confirm(agent, lesson, "erased")
    assert decided == [True]  # it was quiet when read
    assert created and body["confirmed"] == []
    assert Outcome.objects.get(outcome_id="erased").response == body
    assert not LessonEvidence.objects.exists()
