"""Self-report recency gathered per process and written by a background thread
(memory.lessons.recency), the production default: every use counted once, none
lost while the database refuses a write, and a caller's transaction keeps its own.

These tests commit (``transaction=True``): the writer thread has a connection of its
own and sees only committed rows.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import override_settings
from django.utils import timezone

from memory.lessons import recency
from memory.models import Knowledge, Lesson, Outcome
from tests.factories.identity import api_client
from tests.factories.lessons import KnowledgeFactory, LessonFactory, check, outcome_payload, step
from tests.memory.lessons.test_outcome_recency import _row_held

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/api/v1/outcomes/"


def _until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@override_settings(CAIRN_RECENCY_FLUSH_MS=100)
def test_agent_outcomes_from_many_clients_count_every_use_once(agent):
    lesson = LessonFactory(workspace=agent.workspace, operation_key="pytest", state="active")
    item = KnowledgeFactory(workspace=agent.workspace, operation_key="pytest")
    confidence = lesson.confidence
    sessions = _other_sessions()  # e.g. the test Celery worker's
    posts = 40

    def post(i):
        try:
            client = api_client(agent, scope="agent")
            body = outcome_payload(
                outcome_id=f"r-{i}",
                approach=[step("pytest", "tests", "ok", 1)],
                checks=[check(1, 0)],
                in_play=[
                    {"type": "lesson", "id": lesson.pk},
                    {"type": "knowledge", "id": item.pk},
                ],
            )
            return client.post(URL, body, format="json").status_code
        finally:
            connection.close()  # this thread's own connection

    started = timezone.now()
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(post, range(posts)))
    assert statuses == [201] * posts
    # The answers came back before the marks were written; the writer adds them all.
    assert _until(lambda: Lesson.objects.get(pk=lesson.pk).use_count == posts)
    assert _until(lambda: Knowledge.objects.get(pk=item.pk).use_count == posts)
    time.sleep(0.3)  # a later write would show as an overcount
    lesson.refresh_from_db()
    item.refresh_from_db()
    assert (lesson.use_count, item.use_count) == (posts, posts)
    assert lesson.last_used_at >= started and item.last_used_at >= started
    assert lesson.confidence == confidence  # the model's word moves recency only
    assert Outcome.objects.filter(agent=agent).count() == posts
    # Idle again, the writer lets its database connection go.
    assert _until(lambda: _other_sessions() <= sessions)


def _other_sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


@pytest.fixture
def gatherer(monkeypatch):
    """A gatherer of this test's own that only ``recency_flush()`` writes."""
    mine = recency._Gatherer(background=False)
    monkeypatch.setattr(recency, "_gatherer", mine)
    return mine


def test_marks_wait_out_a_database_refusal_and_are_written_once(agent, gatherer):
    lesson = LessonFactory(workspace=agent.workspace, operation_key="pytest", state="active")
    at = timezone.now() - timedelta(minutes=5)
    with override_settings(CAIRN_RECENCY_FLUSH_MS=200):
        for _ in range(3):
            recency.recency_mark(targets={Lesson: {lesson.pk}}, now=at)
    with _row_held(lesson.pk), pytest.raises(DatabaseError):
        recency.recency_flush()
    lesson.refresh_from_db()
    assert lesson.use_count == 0  # not written, and still pending
    assert recency.recency_flush() == 1
    assert recency.recency_flush() == 0  # nothing twice
    lesson.refresh_from_db()
    assert lesson.use_count == 3 and lesson.last_used_at == at


def test_inside_a_callers_transaction_the_marks_roll_back_with_it(agent, gatherer):
    lesson = LessonFactory(workspace=agent.workspace, operation_key="pytest", state="active")
    with override_settings(CAIRN_RECENCY_FLUSH_MS=200):
        with pytest.raises(RuntimeError), transaction.atomic():
            recency.recency_mark(targets={Lesson: {lesson.pk}}, now=timezone.now())
            assert Lesson.objects.get(pk=lesson.pk).use_count == 1  # written at once
            raise RuntimeError("the caller gives up")
    assert not gatherer.pending
    assert Lesson.objects.get(pk=lesson.pk).use_count == 0
    assert not connection.in_atomic_block


def test_the_later_time_wins_and_uses_add_up():
    pending = {}
    early, late = timezone.now() - timedelta(hours=1), timezone.now()
    recency._merge(pending, {Lesson: {1: (1, late), 2: (1, early)}})
    recency._merge(pending, {Lesson: {1: (2, early)}, Knowledge: {7: (1, early)}})
    assert pending == {Lesson: {1: (3, late), 2: (1, early)}, Knowledge: {7: (1, early)}}


def test_what_is_pending_at_exit_is_written(agent, gatherer):
    lesson = LessonFactory(workspace=agent.workspace, operation_key="pytest", state="active")
    with override_settings(CAIRN_RECENCY_FLUSH_MS=200):
        recency.recency_mark(targets={Lesson: {lesson.pk}}, now=timezone.now())
        recency.recency_mark(targets={Lesson: {lesson.pk}}, now=timezone.now())
    assert Lesson.objects.get(pk=lesson.pk).use_count == 0
    recency._flush_at_exit()  # what the interpreter runs on a normal exit
    assert Lesson.objects.get(pk=lesson.pk).use_count == 2
    assert not gatherer.pending


def test_an_agent_outcomes_in_play_rows_are_read_by_the_writer_with_the_same_rules(agent, gatherer):
    """An agent token's outcome reads nothing it had in play on the request path; the
    writer reads the rows later and marks only what the outcome speaks of: the
    current version of a lesson on its own operation, in its workspace and project,
    not retired, and active knowledge items."""
    from django.db import connection as conn
    from django.test.utils import CaptureQueriesContext

    from tests.factories.identity import AgentFactory
    from tests.factories.lessons import digest, passed_payload

    ws = agent.workspace
    own = LessonFactory(workspace=ws, state="active")
    other_op = LessonFactory(workspace=ws, operation_key="ruff", state="active")
    elsewhere = LessonFactory(state="active")  # another workspace's
    retired = LessonFactory(workspace=ws, state="retired", retired_by="system")
    head = LessonFactory(workspace=ws, state="active")
    old = LessonFactory(workspace=ws, superseded_by=head, supersede_reason="edited")
    other_project = LessonFactory(
        workspace=ws, state="active", project_digest=digest("https://github.com/x/y.git")
    )
    item = KnowledgeFactory(workspace=ws)
    archived = KnowledgeFactory(workspace=ws, status="archived")
    foreign_item = KnowledgeFactory(workspace=AgentFactory().workspace)
    lessons = [own, other_op, elsewhere, retired, old, other_project]
    items = [item, archived, foreign_item]
    in_play = [{"type": "lesson", "id": row.pk} for row in lessons] + [
        {"type": "knowledge", "id": row.pk} for row in items
    ]
    client = api_client(agent, scope="agent")
    with override_settings(CAIRN_RECENCY_FLUSH_MS=200), CaptureQueriesContext(conn) as queries:
        response = client.post(URL, passed_payload(in_play=in_play), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["confirmed"] == []
    read = [q["sql"] for q in queries.captured_queries if "memory_lesson" in q["sql"]]
    assert not read  # nothing of what it had in play, on the request path
    assert len(gatherer.reports) == 1

    # The writer cannot reach the database: the report waits, unresolved.
    with _row_held(own.pk), pytest.raises(DatabaseError):
        recency.recency_flush()
    assert len(gatherer.reports) == 1
    assert Lesson.objects.get(pk=own.pk).use_count == 0

    assert recency.recency_flush() == 3  # own, head and item
    assert not gatherer.reports and recency.recency_flush() == 0
    uses = dict(Lesson.objects.values_list("pk", "use_count"))
    assert {row.pk: uses[row.pk] for row in [*lessons, head]} == {
        own.pk: 1,
        other_op.pk: 0,
        elsewhere.pk: 0,
        retired.pk: 0,
        old.pk: 0,
        head.pk: 1,
        other_project.pk: 0,
    }
    uses = dict(Knowledge.objects.values_list("pk", "use_count"))
    assert [uses[row.pk] for row in items] == [1, 0, 0]
