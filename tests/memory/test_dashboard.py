"""The dashboard's health numbers: review latency, learned vs retired, histograms,
claimed and duplicate lessons. Each is one SQL aggregate, scoped to one workspace."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.dashboard import (
    confidence_histograms,
    lesson_health_counts,
    lessons_per_day,
    review_latency,
)
from memory.models import AuditEvent, Lesson
from tests.factories.identity import WorkspaceFactory
from tests.factories.lessons import BLOG, KnowledgeFactory, LessonFactory, digest

pytestmark = pytest.mark.django_db


def at(moment, **fields):
    event = AuditEvent.objects.create(**fields)
    AuditEvent.objects.filter(pk=event.pk).update(created_at=moment)
    return event


def lesson_born(workspace, moment, **fields):
    lesson = LessonFactory(workspace=workspace, **fields)
    Lesson.objects.filter(pk=lesson.pk).update(created_at=moment)
    return lesson


def test_review_latency_is_the_median_to_a_persons_first_decision(workspace):
    now = timezone.now()
    for hours in (1, 3, 10):
        lesson = lesson_born(workspace, now - timedelta(hours=hours + 1))
        decided = now - timedelta(hours=1)
        at(decided, workspace=workspace, actor="user:ada", action="lesson.pin",
           target_type="lesson", target_id=str(lesson.pk))  # fmt: skip
        # A later decision on the same lesson does not count again.
        at(now, workspace=workspace, actor="user:bo", action="lesson.retire",
           target_type="lesson", target_id=str(lesson.pk))  # fmt: skip
    # Not a person's decision; and another workspace's.
    other = lesson_born(workspace, now - timedelta(days=2))
    at(now, workspace=workspace, actor="system:decay", action="lesson.retire",
       target_type="lesson", target_id=str(other.pk))  # fmt: skip
    foreign_ws = WorkspaceFactory()
    foreign = lesson_born(foreign_ws, now - timedelta(days=9))
    at(now, workspace=foreign_ws, actor="user:eve", action="lesson.retire",
       target_type="lesson", target_id=str(foreign.pk))  # fmt: skip
    latency = review_latency(workspace=workspace, now=now)
    assert latency["n"] == 3
    assert latency["median_s"] == pytest.approx(3 * 3600, abs=5)


def test_review_latency_ignores_decisions_older_than_the_window(workspace):
    now = timezone.now()
    lesson = lesson_born(workspace, now - timedelta(days=60))
    at(now - timedelta(days=45), workspace=workspace, actor="user:ada", action="lesson.retire",
       target_type="lesson", target_id=str(lesson.pk))  # fmt: skip
    assert review_latency(workspace=workspace, now=now) == {"median_s": None, "n": 0, "days": 30}


def test_lessons_per_day_counts_learned_and_retired_by_day(workspace):
    now = timezone.now()
    for days_ago, action in [(0, "lesson.learn"), (0, "lesson.create"), (0, "lesson.retire"),
                             (3, "lesson.learn"), (40, "lesson.learn"), (0, "lesson.pin")]:  # fmt: skip
        at(now - timedelta(days=days_ago), workspace=workspace, actor="system", action=action)
    at(now, workspace=WorkspaceFactory(), actor="system", action="lesson.learn")
    days = lessons_per_day(workspace=workspace, now=now)
    assert len(days) == 30 and days[-1]["day"] == timezone.localdate(now)
    assert (days[-1]["learned"], days[-1]["retired"]) == (2, 1)
    assert (days[-4]["learned"], days[-4]["retired"]) == (1, 0)
    assert sum(d["learned"] for d in days) == 3  # the 40-day-old one is outside


def test_histograms_bin_active_confidence(workspace):
    for confidence in (0.05, 0.15, 0.5, 0.55, 0.95):
        LessonFactory(workspace=workspace, confidence=confidence)
    LessonFactory(workspace=workspace, confidence=0.5, state="retired", retired_by="person")
    for confidence in (0.0, 1.0):
        KnowledgeFactory(workspace=workspace, confidence=confidence)
    KnowledgeFactory(workspace=workspace, confidence=0.3, status="archived")
    KnowledgeFactory(workspace=WorkspaceFactory(), confidence=0.3)
    result = confidence_histograms(workspace=workspace)
    assert result["lessons"] == [1, 1, 0, 0, 0, 2, 0, 0, 0, 1]
    assert result["knowledge"] == [1, 0, 0, 0, 0, 0, 0, 0, 0, 1]  # 1.0 is in the top bin


def test_claimed_and_duplicate_lessons_are_counted(workspace):
    LessonFactory(workspace=workspace, state="claimed", confidence=0.3)
    same = {"text": "Run pytest from the root.", "normalized_text": "run pytest from the root"}
    LessonFactory(workspace=workspace, **same)
    LessonFactory(workspace=workspace, project_digest=digest(BLOG), **same)
    LessonFactory(workspace=workspace, project_digest=digest(BLOG), state="retired",
                  retired_by="person", **same)  # fmt: skip
    LessonFactory(workspace=workspace)
    LessonFactory(workspace=WorkspaceFactory(), **same)
    assert lesson_health_counts(workspace=workspace) == {
        "claimed": 1,
        "duplicates": 2,
        "duplicate_groups": 1,
    }
