"""memory.core.rows: row_insert writes the row Model.objects.create writes; a
PreparedQuery reads the rows its queryset reads, whatever values it is given."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from memory.core.rows import PreparedQuery, row_insert
from memory.models import Knowledge, Lesson, Outcome
from tests.factories.identity import AgentFactory
from tests.factories.lessons import KnowledgeFactory, LessonFactory

pytestmark = pytest.mark.django_db


def _columns(obj) -> dict:
    return {
        f.attname: getattr(obj, f.attname)
        for f in Outcome._meta.concrete_fields
        if f.attname not in ("id", "outcome_id", "created_at")
    }


def test_it_stores_what_the_orm_stores(agent):
    fields = dict(
        workspace_id=agent.workspace_id,
        agent=agent,
        session_id="s",
        project_digest="d" * 64,
        approach=[{"operation_key": "pytest", "outcome": "ok", "step": 1, "note": 'é "q"'}],
        checks=[{"kind": "test", "exit_code": 0}],
        in_play=[{"type": "lesson", "id": 3}],
        wall_s=1.5,
        passed=None,
        channel="harness",
    )
    before = timezone.now()
    fast = row_insert(Outcome(outcome_id="fast", **fields))
    slow = Outcome.objects.create(outcome_id="slow", **fields)
    assert fast.pk and fast.pk != slow.pk and not fast._state.adding
    stored = Outcome.objects.get(pk=fast.pk)
    assert _columns(stored) == _columns(Outcome.objects.get(pk=slow.pk))
    assert stored.approach[0]["note"] == 'é "q"' and stored.response == {}
    assert before <= stored.created_at == fast.created_at  # auto_now_add
    assert stored.outcome_id == "fast" and stored.turn_index == 0  # defaults


def _lessons(workspace_id, ids):
    return (
        Lesson.objects.filter(workspace_id=workspace_id, pk__any=ids)
        .annotate(
            twins=Exists(
                Lesson.objects.filter(
                    workspace_id=OuterRef("workspace_id"), operation_key=OuterRef("operation_key")
                ).exclude(pk=OuterRef("pk"))
            )
        )
        .order_by("pk")
    )


def _values(lesson: Lesson) -> dict:
    return {f.attname: getattr(lesson, f.attname) for f in Lesson._meta.concrete_fields}


def test_a_prepared_query_reads_what_its_queryset_reads(agent):
    other = AgentFactory()
    mine = [
        LessonFactory(workspace=agent.workspace, operation_key=op, text=f"use {op} {i}")
        for i, op in enumerate(["pytest", "pytest", "ruff", "mypy"])
    ]
    theirs = LessonFactory(workspace=other.workspace, operation_key="pytest")
    prepared = PreparedQuery(_lessons, ints=("workspace_id",), lists=("ids",))
    # Lists of several lengths run through the one compiled statement; another
    # workspace's row is never read, whatever ids are asked for.
    for ids in ([mine[0].pk], [m.pk for m in mine], [mine[3].pk, theirs.pk, mine[1].pk], [], [0]):
        rows = prepared.rows(workspace_id=agent.workspace_id, ids=ids)
        expected = list(_lessons(agent.workspace_id, ids))
        assert [(r.pk, r.twins) for r in rows] == [(e.pk, e.twins) for e in expected]
        assert [_values(r) for r in rows] == [_values(e) for e in expected]
    every = prepared.rows(workspace_id=agent.workspace_id, ids=[m.pk for m in mine])
    assert [r.twins for r in every] == [True, True, False, False]
    assert prepared.rows(workspace_id=other.workspace_id, ids=[theirs.pk])[0].pk == theirs.pk


def test_a_prepared_locked_read_compiles_in_its_transaction_and_converts_fields(agent):
    item = KnowledgeFactory(workspace=agent.workspace, metadata={"a": [1, "é"]})
    prepared = PreparedQuery(
        lambda workspace_id, ids: (
            Knowledge.objects.filter(workspace_id=workspace_id, pk__any=ids)
            .select_for_update(no_key=True, of=("self",))
            .order_by("id")
        ),
        ints=("workspace_id",),
        lists=("ids",),
    )
    with transaction.atomic():
        (row,) = prepared.rows(workspace_id=agent.workspace_id, ids=[item.pk])
    assert row.metadata == {"a": [1, "é"]} and row.created_at == item.created_at
    assert "FOR NO KEY UPDATE" in prepared._compiled[1]


def test_a_value_that_does_not_land_once_is_refused_at_compile():
    prepared = PreparedQuery(lambda workspace_id: Lesson.objects.all(), ints=("workspace_id",))
    with pytest.raises(TypeError, match="lands 0 times"):
        prepared.rows(workspace_id=1)


def test_a_keyed_insert_writes_its_own_id_into_the_json_and_runs_the_other_statement(agent):
    from django.db import IntegrityError

    from memory.core.rows import row_insert_for_each, row_insert_keyed
    from memory.models import AuditEvent, ProjectLabel

    def outcome(outcome_id):
        return Outcome(
            workspace_id=agent.workspace_id,
            agent=agent,
            outcome_id=outcome_id,
            session_id="s",
            project_digest="d" * 64,
            response={"outcome_id": outcome_id, "id": None},
        )

    def label(text):
        return [
            (
                "label",
                "INSERT INTO memory_projectlabel (workspace_id, project_digest, label, "
                "updated_by, updated_at) VALUES (%s, %s, %s, 'test', now()) "
                "ON CONFLICT (workspace_id, project_digest) DO NOTHING RETURNING id",
                [agent.workspace_id, "d" * 64, text],
            ),
            # A second CTE reading the first: one audit row for each label written.
            (
                "audit",
                *row_insert_for_each(
                    AuditEvent(workspace_id=agent.workspace_id, actor="t", action="label"),
                    source="label",
                ),
            ),
        ]

    first = row_insert_keyed(outcome("one"), key_into="response", also=label("shop"))
    second = row_insert_keyed(outcome("two"), key_into="response", also=label("x"))
    row_insert_keyed(outcome("three"), key_into="response")
    # The label was written once (the second found it), and audited once.
    assert list(ProjectLabel.objects.values_list("label", flat=True)) == ["shop"]
    assert AuditEvent.objects.filter(action="label").count() == 1
    for row in (first, second):
        stored = Outcome.objects.get(pk=row.pk)
        assert stored.response == {"outcome_id": row.outcome_id, "id": row.pk} == row.response
    assert first.pk < second.pk and not second._state.adding
    # One statement: when the outcome loses on its unique key, the other write is undone.
    ProjectLabel.objects.all().delete()
    with pytest.raises(IntegrityError), transaction.atomic():
        row_insert_keyed(outcome("one"), key_into="response", also=label("again"))
    assert not ProjectLabel.objects.exists()
    assert AuditEvent.objects.filter(action="label").count() == 1
