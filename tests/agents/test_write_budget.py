"""Every write of the agent API is charged to its token's budget before any work
(issue 56, item 4; agents/budget.py). The operations come from the API schema, as in
tests/agents/test_write_races.py: a new write path is covered the day it is added."""

from __future__ import annotations

import time

import pytest

from agents.budget import (
    WINDOW_S,
    WINDOWS_PER_MIN,
    budgets_for,
    workspace_slot_give,
    workspace_slot_take,
)
from tests.agents.test_write_races import OPERATIONS
from tests.factories.identity import AgentFactory, api_client

pytestmark = pytest.mark.django_db

URL_ARGS = {"namespace": "ns", "key": "k", "item_id": 1, "lesson_id": 1, "session_id": "s",
            "name": "triage-inbox", "turn_id": "t1", "check_id": 1}  # fmt: skip
# Nested deeper than CAIRN_JSON_MAX_DEPTH: the input guard (after the budget) would
# answer 400 too_deep, and a view 400 invalid; only a charge before both answers 429.
UNPARSEABLE = b"[" * 100


def _fresh_window(need: float = 3.0):
    """Wait for a budget window with at least ``need`` seconds left, so a test's
    requests share it."""
    left = WINDOW_S - time.time() % WINDOW_S
    if left < need:
        time.sleep(left + 0.05)


@pytest.fixture
def one_per_window(settings):
    for name in ("WRITE", "SCAN", "RECALL"):
        setattr(settings, f"CAIRN_{name}_RATE_PER_MIN", WINDOWS_PER_MIN)
    settings.CAIRN_WRITE_BYTES_PER_MIN = settings.CAIRN_SCAN_BYTES_PER_MIN = 10**9


def _url(path: str) -> str:
    return path.format(**URL_ARGS)


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_every_write_in_the_schema_is_charged_before_its_body_is_read(method, path, one_per_window):
    from django.urls import resolve

    match = resolve(_url(path))
    assert budgets_for(match.url_name, method), f"{method} {path} spends no budget"
    client = api_client(AgentFactory(), scope="harness")
    _fresh_window()
    first = client.generic(method, _url(path), b"{}", content_type="application/json")
    assert first.status_code != 429 and first.status_code < 500, (first.status_code, first.content)
    refused = client.generic(method, _url(path), UNPARSEABLE, content_type="application/json")
    assert refused.status_code == 429, (method, path, refused.status_code, refused.content[:200])
    error = refused.json()["error"]
    assert error["code"] == "rate_limited"
    budget = budgets_for(match.url_name, method)[0]
    assert f"its {budget.name} budget" in error["message"]
    assert budget.rate_setting in error["message"]
    assert error["fields"] == {"token": [f"over the per-minute {budget.name} budget"]}
    assert 1 <= int(refused["Retry-After"]) <= WINDOW_S


def test_a_token_spending_its_budget_leaves_other_tokens_and_workspaces_alone(settings, make_api):
    settings.CAIRN_WRITE_RATE_PER_MIN = 2 * WINDOWS_PER_MIN
    settings.CAIRN_RECALL_RATE_PER_MIN = 2 * WINDOWS_PER_MIN
    spender = AgentFactory()
    noisy = api_client(spender, scope="agent")
    same_agent = api_client(spender, scope="agent")
    same_workspace = api_client(AgentFactory(workspace=spender.workspace), scope="harness")
    elsewhere = make_api()

    def remember(client, n):
        body = {"content": f"Deploy window {n} of {client.token.pk} is noon.", "category": "note"}
        return client.post("/api/v1/knowledge/", body, format="json").status_code

    _fresh_window(5.0)
    assert [remember(noisy, n) for n in range(2)] == [201, 201]
    assert remember(noisy, 2) == 429
    # Another token of the same agent, another agent's token in the same workspace and a
    # token of another workspace each have their whole budget.
    for client in (same_agent, same_workspace, elsewhere):
        assert [remember(client, n) for n in range(2)] == [201, 201]
    # The spent writes budget is not the token's recall budget.
    assert noisy.post("/api/v1/recall/", {"query": "deploys"}, format="json").status_code == 200


def test_declared_body_bytes_spend_the_writes_budget(settings, api):
    settings.CAIRN_WRITE_BYTES_PER_MIN = 5_000 * WINDOWS_PER_MIN
    body = {"content": "x" * 1_900, "category": "note", "metadata": {"pad": "y" * 1_500}}
    _fresh_window()
    assert api.post("/api/v1/knowledge/", body, format="json").status_code == 201
    refused = api.post("/api/v1/knowledge/", {**body, "content": "z" * 1_900}, format="json")
    assert refused.status_code == 429
    message = refused.json()["error"]["message"]
    assert "writes budget" in message and "CAIRN_WRITE_BYTES_PER_MIN" in message


def test_reads_are_not_charged(settings, api):
    settings.CAIRN_WRITE_RATE_PER_MIN = WINDOWS_PER_MIN
    _fresh_window()
    for _ in range(3):
        assert api.get("/api/v1/knowledge/").status_code == 200


def test_a_request_without_a_valid_token_is_not_charged_but_still_capped(settings, client):
    settings.CAIRN_WRITE_RATE_PER_MIN = WINDOWS_PER_MIN
    answers = [
        client.post(
            "/api/v1/knowledge/",
            {"content": "a"},
            content_type="application/json",
            HTTP_AUTHORIZATION="Bearer cairn_nope",
        ).status_code  # fmt: skip
        for _ in range(3)
    ]
    assert answers == [401, 401, 401]
    big = b'{"content":"' + b"a" * 200_000 + b'"}'
    response = client.generic("POST", "/api/v1/knowledge/", big, content_type="application/json")
    assert response.status_code == 413


@pytest.fixture
def slots(settings):
    """Hold in-flight slots of a workspace as requests in progress would."""
    held = []

    def hold(workspace_id, n):
        for _ in range(n):
            key = workspace_slot_take(workspace_id=workspace_id, limit=n)
            assert key is not None
            held.append(key)
        return held

    yield hold
    for key in held:
        workspace_slot_give(key)


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_every_write_in_the_schema_takes_a_workspace_slot_before_its_body_is_read(
    method, path, settings, slots
):
    settings.CAIRN_WORKSPACE_CONCURRENT_REQUESTS = 2
    agent = AgentFactory()
    client = api_client(agent, scope="harness")
    slots(agent.workspace_id, 2)
    refused = client.generic(method, _url(path), UNPARSEABLE, content_type="application/json")
    assert refused.status_code == 429, (method, path, refused.status_code, refused.content[:200])
    assert refused.json()["error"]["fields"] == {"workspace": ["too many requests in progress"]}
    assert refused["Retry-After"] == "1"


def test_a_busy_workspace_leaves_other_workspaces_alone_and_slots_come_back(
    settings, api, make_api, slots
):
    settings.CAIRN_WORKSPACE_CONCURRENT_REQUESTS = 2
    body = {"content": "Deploys freeze on Fridays after noon.", "category": "fact"}
    # Served requests give their slot back: many in a row with a limit of two.
    assert [api.post("/api/v1/knowledge/", {**body, "content": f"Note {n}."}, format="json")
            .status_code for n in range(4)] == [201] * 4  # fmt: skip
    held = slots(api.token.workspace_id, 2)
    assert api.post("/api/v1/knowledge/", body, format="json").status_code == 429
    assert api.get("/api/v1/knowledge/").status_code == 200  # reads take no slot
    assert make_api().post("/api/v1/knowledge/", body, format="json").status_code == 201
    workspace_slot_give(held.pop())
    assert api.post("/api/v1/knowledge/", body, format="json").status_code == 201
