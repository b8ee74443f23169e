"""Lessons learned or retired since a day: the dashboard's numbers and the Lessons
filter they link to are one rule, so a number is the rows its link shows."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.lessons.changes import lesson_change_counts, lessons_changed_since
from memory.lessons.lifecycle import lesson_edit, lesson_restore, lesson_retire
from memory.lessons.selectors import lesson_browse
from memory.models import AuditEvent, Lesson
from tests.factories.identity import WorkspaceFactory, person_actor
from tests.factories.lessons import LessonFactory

pytestmark = pytest.mark.django_db


def learned(workspace, *, days_ago=0, action="lesson.learn", **fields):
    lesson = LessonFactory(workspace=workspace, **fields)
    event = AuditEvent.objects.create(
        workspace=workspace, actor="system:outcomes", action=action,
        target_type="lesson", target_id=str(lesson.pk),
    )  # fmt: skip
    moment = timezone.now() - timedelta(days=days_ago)
    AuditEvent.objects.filter(pk=event.pk).update(created_at=moment)
    Lesson.objects.filter(pk=lesson.pk).update(created_at=moment)
    return lesson


def ids(queryset):
    return sorted(queryset.values_list("pk", flat=True))


def test_learned_counts_each_lesson_once_at_its_current_row(workspace):
    since = timezone.localdate() - timedelta(days=6)
    posted = learned(workspace, action="lesson.create", text="Post it.", normalized_text="post it")
    looped = learned(workspace, days_ago=2, text="Loop it.", normalized_text="loop it")
    old = learned(workspace, days_ago=20, text="Old one.", normalized_text="old one")
    edited = lesson_edit(
        lesson=looped, actor=person_actor("ada"), text="Loop it twice.", reason="clearer"
    )
    learned(WorkspaceFactory(), text="Elsewhere.", normalized_text="elsewhere")
    # No audit event, no "learned" (a merge target, an import).
    LessonFactory(workspace=workspace, text="Quiet.", normalized_text="quiet")

    rows = lessons_changed_since(workspace=workspace, change="learned", since=since)
    assert ids(rows) == sorted([posted.pk, edited.pk])
    assert old.pk not in ids(rows) and looped.pk not in ids(rows)
    counts = lesson_change_counts(workspace=workspace, since=since)
    assert counts["learned"] == rows.count() == 2
    # The list's filter is the same rule.
    assert ids(lesson_browse(workspace=workspace, changed="learned", since=since)) == ids(rows)


def test_retired_counts_lessons_retired_since_and_still_retired(workspace):
    since = timezone.localdate() - timedelta(days=6)
    gone = LessonFactory(workspace=workspace, text="Gone.", normalized_text="gone")
    back = LessonFactory(workspace=workspace, text="Back.", normalized_text="back")
    long_ago = LessonFactory(workspace=workspace, text="Long ago.", normalized_text="long ago")
    for lesson in (gone, back, long_ago):
        lesson_retire(lesson=lesson, actor=person_actor("ada"), reason="wrong")
    lesson_restore(
        lesson=Lesson.objects.get(pk=back.pk), actor=person_actor("ada"), reason="it was right"
    )
    Lesson.objects.filter(pk=long_ago.pk).update(retired_at=timezone.now() - timedelta(days=9))

    rows = lessons_changed_since(workspace=workspace, change="retired", since=since)
    assert ids(rows) == [gone.pk]
    assert lesson_change_counts(workspace=workspace, since=since)["retired"] == 1
    assert ids(lesson_browse(workspace=workspace, changed="retired", since=since)) == [gone.pk]
    # A day further back reaches the older retirement.
    earlier = since - timedelta(days=7)
    assert lesson_change_counts(workspace=workspace, since=earlier)["retired"] == 2
