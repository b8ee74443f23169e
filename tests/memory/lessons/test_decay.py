"""Decay is a function of idle time (not of runs), pinned items are exempt, caps hold,
and the jobs run on a real Celery worker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.lessons.caps import lesson_caps_enforce
from memory.lessons.decay import decay_run, knowledge_restore
from memory.lessons.evidence import evidence_apply
from memory.models import AuditEvent, ConfidenceChange, JobRun, Knowledge, Lesson, LessonState
from memory.tasks import decay, maintenance
from tests.factories.identity import person_actor
from tests.factories.lessons import KnowledgeFactory, LessonFactory

pytestmark = pytest.mark.django_db
NOW = timezone.now()


def idle(obj, days: float):
    """Make ``obj`` look created (and last used) ``days`` before NOW."""
    type(obj).objects.filter(pk=obj.pk).update(created_at=NOW - timedelta(days=days))
    obj.refresh_from_db()
    return obj


def conf(obj) -> float:
    obj.refresh_from_db()
    return obj.confidence


# --- lessons ---------------------------------------------------------------------------------------------


def test_it_takes_two_hundredths_per_seven_idle_days_from_a_lesson():
    fresh = LessonFactory()
    six = idle(LessonFactory(), 6.9)
    twenty = idle(LessonFactory(), 20)
    decay_run(now=NOW)
    assert conf(fresh) == 0.5
    assert conf(six) == 0.5
    assert conf(twenty) == pytest.approx(0.46)


def test_it_changes_nothing_when_run_again():
    lesson = idle(LessonFactory(), 20)
    item = idle(KnowledgeFactory(), 35)
    first = decay_run(now=NOW)
    rows = ConfidenceChange.objects.count()
    second = decay_run(now=NOW)
    third = decay_run(now=NOW + timedelta(hours=20))
    assert (first["lessons_decayed"], first["knowledge_decayed"]) == (1, 1)
    assert (second["lessons_decayed"], second["knowledge_decayed"]) == (0, 0)
    assert (third["lessons_decayed"], third["knowledge_decayed"]) == (0, 0)
    assert ConfidenceChange.objects.count() == rows
    assert conf(lesson) == pytest.approx(0.46)
    assert conf(item) == pytest.approx(0.45)


def test_it_decays_by_idle_time_not_by_the_number_of_runs():
    daily = idle(LessonFactory(), 0)
    once = idle(LessonFactory(), 0)
    for day in range(1, 29):
        decay_run(now=NOW + timedelta(days=day, minutes=1))
    decay_run(now=NOW + timedelta(days=28, minutes=1))
    assert conf(daily) == pytest.approx(0.42)  # four weeks: -0.08 however often it ran
    assert conf(once) == pytest.approx(0.42)


def test_it_restarts_the_idle_clock_on_use_and_on_evidence():
    used = idle(LessonFactory(), 100)
    Lesson.objects.filter(pk=used.pk).update(last_used_at=NOW - timedelta(days=3))
    confirmed = idle(LessonFactory(), 100)
    evidence_apply(
        target=confirmed,
        kind="test_passed",
        evidence_id="x",
        now=NOW - timedelta(days=8),
        channel="harness",
    )
    decay_run(now=NOW)
    assert conf(used) == 0.5
    assert conf(confirmed) == pytest.approx(0.63)  # 0.65, then one idle week


def test_it_retires_a_lesson_that_decays_below_the_floor():
    lesson = idle(LessonFactory(confidence=0.25), 21)
    counts = decay_run(now=NOW)
    lesson.refresh_from_db()
    assert lesson.confidence == pytest.approx(0.19)
    assert (lesson.state, lesson.retired_by) == (LessonState.RETIRED, "system")
    assert counts["lessons_retired"] == 1
    event = AuditEvent.objects.get(action="lesson.retire", target_id=str(lesson.pk))
    assert event.actor == "system:decay"
    assert AuditEvent.objects.filter(action="decay.run", actor="system:decay").exists()


# --- knowledge ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "days, expected, archived",
    [
        (29, 0.5, False),
        (30, 0.45, False),
        (60, 0.405, False),
        (89, 0.405, False),
        (90, 0.3645, True),
    ],
)
def test_it_decays_knowledge_per_thirty_idle_days_and_archives_at_ninety(days, expected, archived):
    item = idle(KnowledgeFactory(), days)
    decay_run(now=NOW)
    item.refresh_from_db()
    assert item.confidence == pytest.approx(expected)
    assert (item.status == "archived") is archived


def test_it_decays_skills_faster():
    skill = idle(KnowledgeFactory(category="skill"), 28)
    decay_run(now=NOW)
    assert conf(skill) == pytest.approx(0.5 * 0.85**2)


def test_it_exempts_pinned_items_from_decay_retirement_and_archiving():
    lesson = idle(LessonFactory(pinned=True, confidence=0.21), 400)
    item = idle(KnowledgeFactory(pinned=True), 400)
    decay_run(now=NOW)
    lesson.refresh_from_db()
    item.refresh_from_db()
    assert (lesson.confidence, lesson.state) == (0.21, LessonState.ACTIVE)
    assert (item.confidence, item.status) == (0.5, "active")
    assert ConfidenceChange.objects.count() == 0


def test_it_restores_archived_knowledge_in_one_action():
    item = idle(KnowledgeFactory(), 120)
    decay_run(now=NOW)
    item.refresh_from_db()
    assert item.status == "archived"
    knowledge_restore(knowledge=item, actor=person_actor("alice"), now=NOW)
    decay_run(now=NOW + timedelta(days=1))
    item.refresh_from_db()
    assert item.status == "active" and item.archived_at is None
    assert AuditEvent.objects.filter(action="knowledge.restore").count() == 1


# --- caps -------------------------------------------------------------------------------------------------------


def test_it_retires_the_weakest_lessons_beyond_the_cap(settings):
    settings.CAIRN_LESSON_CAP_PER_PROJECT = 3
    settings.CAIRN_LESSON_CAP_GLOBAL = 2
    strong = LessonFactory(confidence=0.9)
    ws = strong.workspace
    weakest = LessonFactory(workspace=ws, confidence=0.3)
    pinned_weak = LessonFactory(workspace=ws, confidence=0.2, pinned=True)
    middle = LessonFactory(workspace=ws, confidence=0.5)
    second_weakest = LessonFactory(workspace=ws, confidence=0.4)
    globals_ = [
        LessonFactory(workspace=ws, scope="global", project_digest="", confidence=c)
        for c in (0.6, 0.7, 0.8)
    ]
    other_ws = LessonFactory.create_batch(3)  # under the cap in its own workspace
    counts = lesson_caps_enforce()
    assert counts["lessons_retired_by_cap"] == 3
    retired = set(Lesson.objects.filter(state="retired").values_list("pk", flat=True))
    assert retired == {weakest.pk, second_weakest.pk, globals_[0].pk}
    for lesson in (strong, pinned_weak, middle, *globals_[1:], *other_ws):
        lesson.refresh_from_db()
        assert lesson.state == LessonState.ACTIVE
    event = AuditEvent.objects.filter(action="lesson.retire").first()
    assert event.actor == "system:maintenance"
    assert lesson_caps_enforce()["lessons_retired_by_cap"] == 0


# --- real workers ------------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_it_runs_decay_on_a_real_worker(celery_worker_process):
    lesson = idle(LessonFactory(), 14.5)
    item = idle(KnowledgeFactory(), 95)
    run_id = decay.delay().get(timeout=60)
    run = JobRun.objects.get(pk=run_id)
    assert (run.kind, run.status) == ("decay", JobRun.Status.SUCCEEDED)
    assert run.counts["lessons_decayed"] == 1
    assert run.counts["knowledge_archived"] == 1
    assert conf(lesson) == pytest.approx(0.46)
    assert Knowledge.objects.get(pk=item.pk).status == "archived"
    # Twice is safe: the second run finds nothing to do.
    second = JobRun.objects.get(pk=decay.delay().get(timeout=60))
    assert second.counts["lessons_decayed"] == second.counts["knowledge_decayed"] == 0
    assert conf(lesson) == pytest.approx(0.46)


@pytest.mark.django_db(transaction=True)
def test_it_runs_maintenance_on_a_real_worker(celery_worker_process):
    LessonFactory.create_batch(2)
    run = JobRun.objects.get(pk=maintenance.delay().get(timeout=60))
    assert (run.kind, run.status) == ("maintenance", JobRun.Status.SUCCEEDED)
    assert run.counts == {"lessons_retired_by_cap": 0, "groups_checked": 0}


def test_it_schedules_decay_and_maintenance_daily():
    from cairn import settings as prod_settings

    schedule = prod_settings.CELERY_BEAT_SCHEDULE
    assert schedule["decay"]["task"] == "memory.tasks.decay"
    assert schedule["decay"]["schedule"] == 24 * 3600
    assert schedule["maintenance"]["task"] == "memory.tasks.maintenance"
