"""memory.core.rows.row_insert writes the row Model.objects.create writes."""

from __future__ import annotations

import pytest
from django.utils import timezone

from memory.core.rows import row_insert
from memory.models import Outcome

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
