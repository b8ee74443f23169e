"""An agent token's outcome records what it had in play after its commit; if that
write fails the outcome still stands and the answer is not a 500."""

from __future__ import annotations

import logging
from contextlib import contextmanager

import psycopg
import pytest
from django.db import connection

from memory.lessons.outcomes import outcome_record
from memory.models import Lesson, Outcome
from tests.factories.lessons import SHOP, LessonFactory, check, step


@contextmanager
def _row_held(lesson_id: int, *, lock: str = "FOR UPDATE", timeout_ms: int = 200):
    """A second connection holds the lesson's row (``lock``); this one waits
    ``timeout_ms`` at most."""
    params = connection.get_connection_params()
    other = psycopg.connect(**{k: v for k, v in params.items() if k != "cursor_factory"})
    try:
        other.execute(f"SELECT 1 FROM memory_lesson WHERE id = %s {lock}", [lesson_id])
        with connection.cursor() as cursor:
            cursor.execute(f"SET lock_timeout = '{int(timeout_ms)}ms'")
        yield
    finally:
        other.rollback()
        other.close()
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")


@pytest.mark.django_db(transaction=True)
def test_a_blocked_recency_write_leaves_the_outcome_recorded(agent, caplog):
    lesson = LessonFactory(workspace=agent.workspace, operation_key="pytest", state="active")
    # Another transaction holds the lesson's row; the recency write gives up fast.
    with _row_held(lesson.pk), caplog.at_level(logging.ERROR, logger="memory.lessons.outcomes"):
        body, created = outcome_record(
            agent=agent,
            outcome_id="blocked",
            session_id="s",
            project_remote=SHOP,
            approach=[step("pytest", "tests", "ok", 1)],
            checks=[check(1, 0)],
            in_play=[{"type": "lesson", "id": lesson.pk}],
        )
    assert created and body["passed"] is True
    assert Outcome.objects.filter(outcome_id="blocked", response=body).exists()
    lesson.refresh_from_db()
    assert lesson.use_count == 0  # the mark was lost, nothing else
    assert "recency of what it had in play not recorded" in caplog.text


def _relearn(agent, outcome_id: str):
    """An agent token's outcome that learns "Prefer pytest over pytest:tests/" again."""
    return outcome_record(
        agent=agent,
        outcome_id=outcome_id,
        session_id="s",
        project_remote=SHOP,
        approach=[step("pytest:tests/", "tests", "failed", 1), step("pytest", "tests", "ok", 2)],
        checks=[check(2, 0)],
    )


@pytest.mark.django_db(transaction=True)
def test_a_relearned_mechanical_lesson_is_a_self_report_written_after_the_commit(agent):
    # The lesson exists: learned once from a harness-reported outcome.
    first, _ = outcome_record(
        agent=agent,
        outcome_id="learn",
        session_id="s",
        project_remote=SHOP,
        approach=[step("pytest:tests/", "tests", "failed", 1), step("pytest", "tests", "ok", 2)],
        checks=[check(2, 0)],
        channel="harness",
    )
    lesson = Lesson.objects.get(pk=first["lessons_created"][0])
    before = (lesson.use_count, lesson.confidence)
    body, created = _relearn(agent, "again")
    assert created and body["lessons_created"] == [] and body["confirmed"] == []
    lesson.refresh_from_db()
    assert (lesson.use_count, lesson.confidence) == (before[0] + 1, before[1])

    # Its transaction never waits on the lesson's row: held elsewhere, the outcome is
    # still recorded, and only the recency mark is lost.
    with _row_held(lesson.pk):
        body, created = _relearn(agent, "while-held")
    assert created and Outcome.objects.filter(outcome_id="while-held", response=body).exists()
    lesson.refresh_from_db()
    assert lesson.use_count == before[0] + 1
