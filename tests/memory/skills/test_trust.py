"""Reads behind the review UI: batch trust-ledger reads equal one-at-a-time reads."""

import pytest

from memory.skills.trust import trust_progress_get, trust_progress_many
from tests.factories.identity import WorkspaceFactory
from tests.factories.skills import (
    harness_feedback,
    learning_agent,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(workspace):
    return learning_agent(workspace)


def test_batch_ledger_progress_equals_one_at_a_time(agent, workspace):
    for scope, outcomes in {"a": [True] * 5, "b": [True, False] * 3, "c": [True]}.items():
        for positive in outcomes:
            harness_feedback(agent=agent, action_type="x", scope=scope, positive=positive)
    harness_feedback(
        agent=learning_agent(WorkspaceFactory()), action_type="x", scope="a", positive=False
    )
    many = trust_progress_many(workspace=workspace, scopes=["a", "b", "c", "unseen", "a"])
    assert set(many) == {"a", "b", "c", "unseen"}
    for scope, progress in many.items():
        recent = progress.pop("recent")
        assert progress == trust_progress_get(workspace=workspace, scope=scope)
        assert len(recent) == min(5, progress["samples"])
        assert all(r["origin"] == "harness feedback" for r in recent)
    assert many["a"]["met"] and not many["b"]["met"] and many["unseen"]["samples"] == 0
    assert trust_progress_many(workspace=workspace, scopes=[]) == {}
