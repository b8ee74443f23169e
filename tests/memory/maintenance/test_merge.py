"""Merge lessons: near-identical lessons on one operation and scope become one, with a
bounded evidence list, never across projects or channels; opposite unverified
preferences go to the contradictions queue."""

from __future__ import annotations

import pytest

from memory.maintenance.merge import lesson_maintain
from memory.models import AuditEvent, Lesson, LessonEvidence, Outcome, ReviewItem
from tests.factories.identity import AgentFactory
from tests.factories.lessons import LessonFactory, digest

pytestmark = pytest.mark.django_db

TEXT = "Run pytest from the repository root before committing."
SAME = "Always run pytest from the repository root before committing."


def verify(lesson, n: int = 1):
    agent = AgentFactory(workspace=lesson.workspace)
    for i in range(n):
        outcome = Outcome.objects.create(
            workspace=lesson.workspace,
            agent=agent,
            outcome_id=f"o-{lesson.pk}-{i}",
            session_id="s",
            project_digest=lesson.project_digest,
            passed=True,
        )
        LessonEvidence.objects.create(lesson=lesson, outcome=outcome)


def test_near_identical_lessons_merge_into_the_strongest(workspace):
    strong = LessonFactory(workspace=workspace, text=TEXT, confidence=0.7)
    weak = LessonFactory(workspace=workspace, text=SAME, confidence=0.5)
    verify(strong, 2)
    verify(weak, 12)
    other = LessonFactory(workspace=workspace, text="Use ruff to format the code.")
    assert lesson_maintain(workspace=workspace)["lessons_merged"] == 1
    strong.refresh_from_db()
    weak.refresh_from_db()
    assert weak.superseded_by_id == strong.pk and weak.supersede_reason == "merged"
    assert strong.confidence == 0.7 and weak.confidence == 0.5  # no boost, nothing lowered
    assert strong.merged_evidence["count"] == 14
    assert len(strong.merged_evidence["latest"]) == 10  # bounded
    assert strong.merged_evidence["merged_from"] == [weak.pk]
    assert Lesson.objects.get(pk=other.pk).superseded_by_id is None
    assert AuditEvent.objects.filter(action="lesson.merge", target_id=str(weak.pk)).exists()
    # Twice changes nothing.
    assert lesson_maintain(workspace=workspace)["lessons_merged"] == 0


def test_a_claimed_lesson_never_absorbs_a_verified_one(workspace):
    verified = LessonFactory(workspace=workspace, text=TEXT, confidence=0.5)
    verify(verified)
    claimed = LessonFactory(workspace=workspace, text=SAME, confidence=0.9, state="claimed")
    assert lesson_maintain(workspace=workspace)["lessons_merged"] == 0
    assert not Lesson.objects.filter(pk__in=[verified.pk, claimed.pk], superseded_by__isnull=False)


def test_it_never_merges_across_projects_operations_or_protected_lessons(workspace):
    LessonFactory(workspace=workspace, text=TEXT)
    LessonFactory(workspace=workspace, text=SAME, project_digest=digest("git@x:other.git"))
    LessonFactory(workspace=workspace, text=SAME, operation_key="make test")
    LessonFactory(workspace=workspace, text=SAME, sealed=True)
    assert lesson_maintain(workspace=workspace)["lessons_merged"] == 0


def test_opposite_unverified_preferences_wait_for_a_person(workspace):
    a = LessonFactory(
        workspace=workspace,
        text="Prefer uv over pip for installs.",
        operation_key="uv",
        avoid_operation_key="pip",
        target="deps",
    )
    b = LessonFactory(
        workspace=workspace,
        text="Prefer pip over uv for installs.",
        operation_key="pip",
        avoid_operation_key="uv",
        target="deps",
    )
    assert lesson_maintain(workspace=workspace)["lesson_conflicts_queued"] == 1
    item = ReviewItem.objects.get(workspace=workspace)
    assert (item.a_type, item.a_id, item.b_id) == ("lesson", a.pk, b.pk)
    assert lesson_maintain(workspace=workspace)["lesson_conflicts_queued"] == 0


def test_a_verified_side_decides_without_people(workspace):
    a = LessonFactory(workspace=workspace, operation_key="uv", avoid_operation_key="pip")
    LessonFactory(workspace=workspace, operation_key="pip", avoid_operation_key="uv")
    verify(a)
    assert lesson_maintain(workspace=workspace)["lesson_conflicts_queued"] == 0
