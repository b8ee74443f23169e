"""An agent token moves nothing that weighs (issue 56, item 7, first half).

Generated from the API schema, with the race cases of ``test_write_races`` as the
valid bodies (so a new write path has a body the day it has a race case): every
write operation, called once with an *agent* token, changes no confidence of any
stored lesson or knowledge item and writes no confidence ledger row, activates no
lesson or delta, and creates no learned fact.

The consent a body cites is the agent's own: before the call, every user turn the
case's preparation stored is marked as posted through the agent channel (what an
agent that writes its own "user" turns gets), so no cited turn is the person's
sentence through the harness.
"""

from __future__ import annotations

import pytest

from memory.models import (
    ConfidenceChange,
    ConversationTurn,
    Knowledge,
    LearnedFact,
    Lesson,
    SkillDelta,
)
from tests.agents.test_write_races import OPERATIONS, RACES
from tests.factories.identity import AgentFactory, api_client

pytestmark = pytest.mark.django_db


def _state(workspace) -> dict:
    return {
        "confidence": {
            **{
                ("lesson", pk): c
                for pk, c in Lesson.objects.filter(workspace=workspace).values_list(
                    "pk", "confidence"
                )
            },
            **{
                ("knowledge", pk): c
                for pk, c in Knowledge.objects.filter(workspace=workspace).values_list(
                    "pk", "confidence"
                )
            },
        },
        "ledger": ConfidenceChange.objects.filter(workspace=workspace).count(),
        "active_lessons": set(
            Lesson.objects.filter(workspace=workspace, state="active").values_list("pk", flat=True)
        ),
        "active_deltas": set(
            SkillDelta.objects.filter(workspace=workspace, status="active").values_list(
                "pk", flat=True
            )
        ),
        "facts": LearnedFact.objects.filter(workspace=workspace).count(),
    }


def test_the_case_list_is_the_schemas():
    assert OPERATIONS
    assert not [op for op in OPERATIONS if op not in RACES]


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_an_agent_token_changes_no_confidence_activates_nothing_and_sets_no_fact(method, path):
    case = RACES[(method, path)]
    agent = AgentFactory()
    clients = {scope: api_client(agent, scope=scope) for scope in ("agent", "harness", "admin")}
    ctx = {"agent": agent, "workspace": agent.workspace, "api": clients["agent"],
           "harness": clients["harness"], "admin": clients["admin"]}  # fmt: skip
    case.prepare(ctx)
    url = (case.path or (lambda c, i: path))(ctx, 0)
    body = case.body(ctx, 0)
    ConversationTurn.objects.filter(workspace=agent.workspace).update(channel="agent")
    before = _state(agent.workspace)
    response = getattr(clients["agent"], method.lower())(
        url, body, format="json", headers=case.headers
    )
    assert response.status_code < 500, response.content[:300]
    after = _state(agent.workspace)
    moved = {
        key: (value, after["confidence"][key])
        for key, value in before["confidence"].items()
        if key in after["confidence"] and after["confidence"][key] != value
    }
    assert not moved, f"{method} {path} moved confidences: {moved}"
    assert after["ledger"] == before["ledger"], "a confidence ledger row was written"
    assert after["active_lessons"] <= before["active_lessons"], "a lesson was activated"
    assert after["active_deltas"] <= before["active_deltas"], "a delta was activated"
    assert after["facts"] == before["facts"], "a fact was created"
