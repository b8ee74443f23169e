"""New words start claimed unless a person writes them, and evidence an agent cited
counts once, after the lesson was in play (domain rules behind the trust seams)."""

from __future__ import annotations

import pytest

from memory.core.actors import Actor
from memory.knowledge.services import knowledge_update
from memory.lessons.confidence_rebuild import confidence_rebuild
from memory.lessons.lifecycle import lesson_edit
from memory.models import (
    ConfidenceChange,
    Knowledge,
    Lesson,
    LessonEvidence,
    LessonSource,
    LessonState,
    Outcome,
)
from tests.factories.identity import person_actor
from tests.factories.knowledge import KnowledgeFactory
from tests.factories.lessons import SHOP, LessonFactory, passed_payload

pytestmark = pytest.mark.django_db


def _earned(harness, api) -> Lesson:
    cited = harness.post("/api/v1/outcomes/", passed_payload(), format="json").json()["id"]
    lesson_id = api.post(
        "/api/v1/lessons/",
        {
            "text": "Run pytest from the repository root.",
            "operation_key": "pytest:.",
            "project_remote": SHOP,
            "evidence": [cited],
        },
        format="json",
    ).json()["id"]
    harness.post(
        "/api/v1/outcomes/",
        passed_payload(in_play=[{"type": "lesson", "id": lesson_id}]),
        format="json",
    )
    lesson = Lesson.objects.get(pk=lesson_id)
    assert (lesson.state, lesson.confidence) == (LessonState.ACTIVE, pytest.approx(0.65))
    return lesson


def test_a_persons_edit_keeps_what_the_old_words_earned(harness, api):
    lesson = _earned(harness, api)
    Lesson.objects.filter(pk=lesson.pk).update(pinned=True)
    lesson.refresh_from_db()
    edited = lesson_edit(
        lesson=lesson, actor=person_actor("ada"), text="Run pytest at the repository root."
    )
    assert (edited.state, edited.confidence, edited.pinned) == (
        LessonState.ACTIVE,
        pytest.approx(0.65),
        True,
    )
    assert (edited.source, edited.channel) == (LessonSource.USER, "person")
    relations = sorted(
        LessonEvidence.objects.filter(lesson=edited).values_list("relation", flat=True)
    )
    assert relations == ["cited", "supports"]


@pytest.mark.parametrize("channel", ["agent", "harness"])
def test_a_tokens_edit_starts_claimed_unpinned_and_without_evidence(harness, api, channel):
    lesson = _earned(harness, api)
    Lesson.objects.filter(pk=lesson.pk).update(pinned=True)
    lesson.refresh_from_db()
    edited = lesson_edit(
        lesson=lesson,
        actor=Actor.for_agent(api.agent, channel=channel),
        text="Run pytest with -x from the repository root.",
    )
    assert (edited.state, edited.confidence, edited.pinned) == (LessonState.CLAIMED, 0.3, False)
    assert not LessonEvidence.objects.filter(lesson=edited).exists()
    assert not ConfidenceChange.objects.filter(target_type="lesson", target_id=edited.pk).exists()


def test_a_tokens_edit_never_lifts_a_contradicted_lesson(api):
    lesson = LessonFactory(workspace=api.agent.workspace, confidence=0.25)
    edited = lesson_edit(lesson=lesson, actor=Actor.for_agent(api.agent), text="Other words.")
    assert (edited.state, edited.confidence) == (LessonState.CLAIMED, 0.25)


def test_a_persons_knowledge_edit_keeps_its_confidence(workspace):
    item = KnowledgeFactory(workspace=workspace, content="CI runs on Debian 12.", confidence=0.8)
    result = knowledge_update(
        workspace=workspace,
        item_id=item.pk,
        actor=person_actor("ada"),
        changes={"content": "CI runs on 13."},
    )
    new = Knowledge.objects.get(pk=result.item.pk)
    assert (new.confidence, new.source, new.channel) == (0.8, "user", "person")


def test_a_tokens_knowledge_edit_never_lifts_a_contradicted_item(api):
    item = KnowledgeFactory(workspace=api.agent.workspace, content="CI runs on 12.", confidence=0.3)
    result = knowledge_update(
        workspace=api.agent.workspace,
        item_id=item.pk,
        actor=Actor.for_agent(api.agent),
        changes={"content": "CI runs on Debian 13 and needs no review."},
    )
    assert Knowledge.objects.get(pk=result.item.pk).confidence == 0.3


def test_erasing_a_cited_outcome_is_not_read_as_a_contradiction(harness, api):
    lesson = _earned(harness, api)
    [cited] = LessonEvidence.objects.filter(lesson=lesson, relation="cited")
    confidence_rebuild(
        workspace=lesson.workspace,
        label="memory.Lesson",
        pk=lesson.pk,
        erased_evidence_ids=[f"outcome:{cited.outcome_id}"],
        erased_outcomes=Outcome.objects.filter(pk=cited.outcome_id),
        erased_posted=[],
    )
    lesson.refresh_from_db()
    # The in-play confirmation and the one lift it unlocked stand; nothing is invented.
    assert (lesson.state, lesson.confidence) == (LessonState.ACTIVE, pytest.approx(0.65))
    assert not LessonEvidence.objects.filter(lesson=lesson, relation="cited").exists()
