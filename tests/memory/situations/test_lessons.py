"""Situation lessons: expiry, supersede (kept), removal by a reviewer, and erasure
and export through the derived-data map."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.models import SituationEvent, SituationLesson, TurnRecovery
from memory.privacy.erasure import erasure_execute
from memory.privacy.exports import export_write
from memory.privacy.selection import ERASURE_SELECTORS, EXPORT_SELECTORS, selector_parse
from memory.situations.lessons import situation_lesson_remove
from memory.situations.selectors import known_blockers
from tests.factories.situations import MACHINE, SituationLessonFactory, gh_logged_out, result_ok

pytestmark = pytest.mark.django_db


def test_an_expired_lesson_is_treated_as_absent(harness):
    old = SituationLessonFactory(agent=harness.agent, expires_at=timezone.now() - timedelta(1))
    assert known_blockers(workspace=old.workspace, machine=MACHINE, now=timezone.now()) == []
    body = result_ok(harness, "t", tool="check_cli_setup", ok=False, situation=gh_logged_out())
    assert body["action"] == "continue"  # not applied: asks only after the budget
    assert body["open_blockers"][0]["lesson_id"] is None


def test_one_live_lesson_per_machine_subject_and_kind_in_the_database(harness):
    SituationLessonFactory(agent=harness.agent)
    with pytest.raises(IntegrityError), transaction.atomic():
        SituationLessonFactory(agent=harness.agent)


def test_transient_kinds_cannot_be_stored_even_by_hand(harness):
    with pytest.raises(IntegrityError), transaction.atomic():
        SituationLessonFactory(agent=harness.agent, kind="offline")


def test_a_reviewer_removes_a_lesson_and_an_agent_cannot(harness, member_client):
    lesson = SituationLessonFactory(agent=harness.agent)
    ws = lesson.workspace
    with pytest.raises(ApplicationError):
        situation_lesson_remove(actor=Actor.for_agent(harness.agent), workspace=ws,
                                lesson_id=lesson.pk, now=timezone.now())  # fmt: skip
    reviewer = member_client(workspace=ws, role="reviewer").user
    situation_lesson_remove(actor=Actor.for_user(reviewer), workspace=ws, lesson_id=lesson.pk,
                            now=timezone.now(), reason="fixed")  # fmt: skip
    lesson.refresh_from_db()
    assert (lesson.state, lesson.end_reason) == ("removed", "removed")
    assert SituationLesson.objects.count() == 1  # kept


def _blocked_turn(harness, turn="t1", session="sess-1"):
    result_ok(harness, turn, tool="check_cli_setup", ok=False, situation=gh_logged_out(),
              session_id=session)  # fmt: skip
    result_ok(harness, turn, user_answered=True)


def test_erasing_the_agent_erases_turns_events_and_lessons(harness):
    _blocked_turn(harness)
    ws = harness.agent.workspace
    selector = selector_parse(workspace=ws, data={"agent": harness.agent.name},
                              allowed=ERASURE_SELECTORS)  # fmt: skip
    erasure_execute(workspace=ws, selector=selector)
    for model in (TurnRecovery, SituationEvent, SituationLesson):
        assert not model.objects.filter(workspace=ws).exists(), model


def test_erasing_a_session_takes_the_lessons_learned_in_it(harness):
    _blocked_turn(harness, turn="keep", session="other")
    SituationLesson.objects.update(state="superseded")  # free the one-live slot
    _blocked_turn(harness, turn="erase", session="secret")
    ws = harness.agent.workspace
    selector = selector_parse(workspace=ws, data={"session": "secret"},
                              allowed=ERASURE_SELECTORS)  # fmt: skip
    erasure_execute(workspace=ws, selector=selector)
    assert list(TurnRecovery.objects.values_list("turn_id", flat=True)) == ["keep"]
    assert list(SituationLesson.objects.values_list("turn__turn_id", flat=True)) == ["keep"]
    assert not SituationEvent.objects.filter(session_id="secret").exists()


def test_an_export_carries_turns_events_and_lessons(harness):
    _blocked_turn(harness)
    ws = harness.agent.workspace
    out = io.StringIO()
    selector = selector_parse(workspace=ws, data={"agent": harness.agent.name},
                              allowed=EXPORT_SELECTORS)  # fmt: skip
    export_write(workspace=ws, selector=selector, out=out, fmt="json")
    sections = json.loads(out.getvalue())["sections"]
    assert len(sections["turn_recoveries"]["records"]) == 1
    assert len(sections["situation_lessons"]["records"]) == 1
    assert {r["event"] for r in sections["situation_events"]["records"]} >= {
        "detected", "lesson_stored", "closed",
    }  # fmt: skip
