"""A person's actions on a lesson: pin, seal, restore and edit, each audited with a reason."""

import pytest

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.lessons.lifecycle import (
    lesson_edit,
    lesson_pin,
    lesson_restore,
    lesson_retire,
    lesson_seal,
)
from memory.models import AuditEvent, ConfidenceChange, LessonState
from tests.factories.identity import AgentFactory, person_actor
from tests.factories.lessons import LessonFactory

pytestmark = pytest.mark.django_db


def events(lesson, action):
    return AuditEvent.objects.filter(action=action, target_type="lesson", target_id=str(lesson.pk))


def test_it_pins_and_unpins_with_the_person_and_reason_in_the_audit_log():
    lesson = LessonFactory()
    pinned = lesson_pin(
        lesson=lesson,
        pinned=True,
        actor=person_actor("ada"),
        reason="release critical",
    )
    assert pinned.pinned
    lesson.refresh_from_db()
    assert lesson.pinned
    event = events(lesson, "lesson.pin").get()
    assert (event.actor, event.reason) == ("user:ada", "release critical")
    lesson_pin(
        lesson=lesson,
        pinned=False,
        actor=person_actor("ada"),
        reason="not any more",
    )
    lesson.refresh_from_db()
    assert not lesson.pinned
    assert events(lesson, "lesson.unpin").get().reason == "not any more"


def test_pinning_twice_changes_nothing_and_records_nothing():
    lesson = LessonFactory(pinned=True)
    lesson_pin(lesson=lesson, pinned=True, actor=person_actor("ada"), reason="again")
    assert not events(lesson, "lesson.pin").exists()


def test_a_sealed_lesson_is_closed_to_agents_but_not_to_people():
    lesson = LessonFactory()
    lesson_seal(
        lesson=lesson,
        sealed=True,
        actor=person_actor("ada"),
        reason="checked by hand",
    )
    with pytest.raises(ApplicationError) as refused:
        lesson_retire(
            lesson=lesson,
            actor=Actor.for_agent(AgentFactory(workspace=lesson.workspace)),
            reason="I think it is wrong",
        )
    assert refused.value.code == "sealed"
    with pytest.raises(ApplicationError):
        lesson_edit(lesson=lesson, text="Something else entirely.", actor=Actor.system("test"))
    assert events(lesson, "lesson.seal").get().reason == "checked by hand"
    lesson_seal(
        lesson=lesson,
        sealed=False,
        actor=person_actor("ada"),
        reason="agents may refine it",
    )
    lesson.refresh_from_db()
    assert not lesson.sealed
    assert (
        lesson_retire(
            lesson=lesson, actor=Actor.for_agent(AgentFactory(workspace=lesson.workspace))
        ).state
        == LessonState.RETIRED
    )


def test_a_retired_lesson_must_be_restored_before_it_is_pinned_or_sealed():
    lesson = LessonFactory()
    lesson_retire(lesson=lesson, actor=person_actor("ada"), reason="wrong")
    for service, flag in ((lesson_pin, "pinned"), (lesson_seal, "sealed")):
        with pytest.raises(ApplicationError) as refused:
            service(
                lesson=lesson,
                actor=person_actor("ada"),
                reason="x",
                **{flag: True},
            )
        assert refused.value.code == "retired"
    lesson.refresh_from_db()
    assert not lesson.pinned and not lesson.sealed


def test_only_the_current_version_can_be_pinned():
    lesson = LessonFactory()
    edited = lesson_edit(
        lesson=lesson,
        text="Run pytest from the root.",
        actor=person_actor("test"),
    )
    with pytest.raises(ApplicationError) as refused:
        lesson_pin(lesson=lesson, pinned=True, actor=person_actor("ada"), reason="x")
    assert refused.value.code == "superseded"
    assert lesson_pin(lesson=edited, pinned=True, actor=person_actor("ada"), reason="x").pinned


def test_restore_and_edit_record_the_reason():
    lesson = LessonFactory(confidence=0.1)
    lesson_retire(lesson=lesson, actor=person_actor("ada"), reason="wrong")
    restored = lesson_restore(
        lesson=lesson, actor=person_actor("bo"), reason="it was right after all"
    )
    assert restored.state == LessonState.CLAIMED  # no supporting outcome: claimed again
    assert events(lesson, "lesson.restore").get().reason == "it was right after all"
    # Raised to the floor through the ledger, as a person's change.
    change = ConfidenceChange.objects.get(target_type="lesson", target_id=lesson.pk)
    assert (change.before, change.after, change.cause) == (0.1, 0.2, "person")
    edited = lesson_edit(
        lesson=restored,
        text="Run pytest from the repository root.",
        actor=person_actor("bo"),
        reason="clearer",
    )
    event = events(lesson, "lesson.edit").get()
    assert (event.actor, event.reason, event.details["new_id"]) == ("user:bo", "clearer", edited.pk)
