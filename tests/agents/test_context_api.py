"""GET /api/v1/context/: bounded, ranked, deterministic plan-time context."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import ConfidenceChange, Lesson
from tests.factories.lessons import BLOG, SHOP, KnowledgeFactory, LessonFactory, digest

URL = "/api/v1/context/"
CHECK_URL = "/api/v1/lessons/check/"


def get(api, **params):
    response = api.get(URL, {"project_remote": SHOP, **params})
    assert response.status_code == 200, response.json()
    return response.json()


def aged(lesson, days):
    Lesson.objects.filter(pk=lesson.pk).update(created_at=timezone.now() - timedelta(days=days))
    return lesson


def test_it_serves_this_projects_and_global_active_lessons_only(api, make_api):
    ws = api.agent.workspace
    here = LessonFactory(workspace=ws)
    everywhere = LessonFactory(workspace=ws, scope="global", project_digest="")
    LessonFactory(workspace=ws, project_digest=digest(BLOG))
    LessonFactory(workspace=ws, state="claimed", confidence=0.3)
    LessonFactory(workspace=ws, state="retired", retired_by="agent")
    newer = LessonFactory(workspace=ws)
    LessonFactory(workspace=ws, superseded_by=newer, supersede_reason="edited")
    LessonFactory(workspace=make_api().agent.workspace)
    body = get(api)
    assert sorted(item["id"] for item in body["lessons"]) == sorted(
        [here.pk, everywhere.pk, newer.pk]
    )
    assert body["blockers"] == []


def test_it_serves_at_most_five_lessons_within_300_tokens(api):
    ws = api.agent.workspace
    for n in range(8):
        LessonFactory(workspace=ws, text=f"Lesson {n}: " + "keep the build green " * 3)
    body = get(api)
    assert len(body["lessons"]) == 5
    long_ones = [
        LessonFactory(workspace=ws, text=f"{n} " + "y" * 270, confidence=0.9) for n in range(6)
    ]
    body = get(api)
    section = body["stable"].split("\n\n")[0]
    assert section.startswith("Lessons")
    assert body["lessons_tokens"] == math.ceil(len(section) / 4) <= 300
    assert len(body["lessons"]) == 4  # a fifth 272-character lesson would not fit
    assert {item["id"] for item in body["lessons"]} <= {lesson.pk for lesson in long_ones}


def test_it_ranks_by_confidence_times_recency_of_evidence(api):
    ws = api.agent.workspace
    stale_strong = aged(LessonFactory(workspace=ws, confidence=0.9, text="Old but strong."), 90)
    fresh = [LessonFactory(workspace=ws, confidence=0.5) for _ in range(5)]
    body = get(api)
    # 0.9 * exp(-90/30) = 0.045 < 0.5: the idle lesson is left out.
    assert stale_strong.pk not in [item["id"] for item in body["lessons"]]
    assert body["lessons"][0]["score"] == pytest.approx(0.5, abs=1e-3)
    Lesson.objects.filter(pk__in=[fresh[0].pk, fresh[1].pk]).update(
        state="retired", retired_by="agent"
    )
    recent_weak = aged(LessonFactory(workspace=ws, confidence=0.4, text="Newer, weaker."), 1)
    body = get(api)
    ids = [item["id"] for item in body["lessons"]]
    assert ids[-2:] == [recent_weak.pk, stale_strong.pk]  # 0.4*e^(-1/30) > 0.045
    assert body["stable"].splitlines()[4:6] == ["- Newer, weaker.", "- Old but strong."]


def test_it_does_not_let_serving_lift_a_lessons_rank(api):
    ws = api.agent.workspace
    for _ in range(5):
        LessonFactory(workspace=ws, confidence=0.6)
    served_a_lot = aged(LessonFactory(workspace=ws, confidence=0.5), 10)
    Lesson.objects.filter(pk=served_a_lot.pk).update(last_used_at=timezone.now(), use_count=500)
    assert served_a_lot.pk not in [item["id"] for item in get(api)["lessons"]]


def test_it_renders_the_same_bytes_for_the_same_state(api):
    ws = api.agent.workspace
    aged(LessonFactory(workspace=ws, confidence=0.9), 20)
    for _ in range(6):
        LessonFactory(workspace=ws, confidence=0.55)
    KnowledgeFactory(workspace=ws, category="preference", content="Answer in British English.")
    KnowledgeFactory(workspace=ws, category="error", content="npm ci fails offline.")
    now = "2030-01-01T12:00:00Z"
    first = get(api, now=now)
    second = get(api, now=now)  # serving refreshed recency in between
    assert first["stable"].encode() == second["stable"].encode()
    assert first["text"].encode() == second["text"].encode()
    assert first["digest"] == second["digest"]
    later = get(api, now="2030-01-01T12:05:00Z")
    assert later["stable"] == first["stable"]
    assert later["dynamic"] != first["dynamic"]
    assert "Answer in British English." in first["stable"]
    assert "2030-01-01T12:00:00Z" in first["dynamic"]


def test_it_refreshes_recency_but_never_confidence_when_serving(api):
    lesson = LessonFactory(workspace=api.agent.workspace)
    fact = KnowledgeFactory(workspace=api.agent.workspace, category="preference")
    get(api)
    get(api)
    lesson.refresh_from_db()
    fact.refresh_from_db()
    assert (lesson.use_count, lesson.confidence) == (2, 0.5)
    assert lesson.last_used_at is not None
    assert (fact.use_count, fact.confidence) == (2, 0.5)
    assert ConfidenceChange.objects.count() == 0


def test_it_lists_known_errors_for_the_context(api, make_api):
    ws = api.agent.workspace
    here = KnowledgeFactory(workspace=ws, category="error", context="work", operation_key="npm:ci")
    everywhere = KnowledgeFactory(workspace=ws, category="error", context="global")
    KnowledgeFactory(workspace=ws, category="error", context="personal")
    KnowledgeFactory(workspace=ws, category="error", status="archived")
    KnowledgeFactory(workspace=make_api().agent.workspace, category="error")
    body = get(api, context="work")
    assert sorted(item["id"] for item in body["errors"]) == sorted([here.pk, everywhere.pk])
    assert set(body["memory"]) >= {"stable", "dynamic", "items", "reminders"}


def test_it_serves_only_global_lessons_without_a_project(api):
    ws = api.agent.workspace
    LessonFactory(workspace=ws)
    everywhere = LessonFactory(workspace=ws, scope="global", project_digest="")
    response = api.get(URL)
    assert [item["id"] for item in response.json()["lessons"]] == [everywhere.pk]


def test_it_names_the_project_by_path_when_there_is_no_remote(api):
    lesson = LessonFactory(workspace=api.agent.workspace, project_digest=_path_digest("/srv/app"))
    response = api.get(URL, {"project_path": "/srv/app/"})
    assert [item["id"] for item in response.json()["lessons"]] == [lesson.pk]


def _path_digest(path):
    from memory.identity.projects import project_digest

    return project_digest(path=path)


def test_it_refuses_bad_parameters(api):
    assert api.get(URL, {"now": "yesterday"}).status_code == 400
    assert api.get(URL, {"machine": "not a digest!"}).status_code == 400


def test_it_refuses_a_time_outside_the_calendar_it_can_render(api):
    response = api.get(URL, {"now": "9999-12-31T23:59:59Z"})
    assert response.status_code == 400
    assert "now" in response.json()["error"]["fields"]


def test_it_answers_the_decision_time_check_for_one_operation(api):
    ws = api.agent.workspace
    about = LessonFactory(workspace=ws, operation_key="pytest:.", confidence=0.7)
    warns = LessonFactory(
        workspace=ws, operation_key="pytest:.", avoid_operation_key="pytest:tests/"
    )
    LessonFactory(workspace=ws, operation_key="npm:test")
    error = KnowledgeFactory(
        workspace=ws, category="error", operation_key="pytest:tests/", content="No conftest."
    )
    response = api.get(CHECK_URL, {"operation_key": "pytest:tests/", "project_remote": SHOP})
    assert response.status_code == 200
    body = response.json()
    assert [lesson["id"] for lesson in body["lessons"]] == [warns.pk]
    assert [item["id"] for item in body["errors"]] == [error.pk]
    assert body["blockers"] == []
    assert "No conftest." in body["text"]
    about_check = api.get(CHECK_URL, {"operation_key": "pytest:.", "project_remote": SHOP})
    assert [lesson["id"] for lesson in about_check.json()["lessons"]] == [about.pk, warns.pk]
    warns.refresh_from_db()
    assert warns.use_count == 2 and warns.confidence == 0.5  # recency, never confidence
    assert api.get(CHECK_URL).status_code == 400  # operation_key is required
