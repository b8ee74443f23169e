"""The per-token budget on the endpoints that scan tool output (agents/budget.py)."""

from __future__ import annotations

import time

import pytest

from agents.budget import WINDOW_S, WINDOWS_PER_MIN
from tests.factories.identity import api_client
from tests.factories.situations import MACHINE

pytestmark = pytest.mark.django_db

CLASSIFY = "/api/v1/situations/classify/"


def _fresh_window():
    """Wait for a budget window with at least 5 s left, so a test's requests share it."""
    left = WINDOW_S - time.time() % WINDOW_S
    if left < 5:
        time.sleep(left + 0.05)


def _classify(client, **body):
    return client.post(CLASSIFY, {"tool": "x", "exit_code": 1, **body}, format="json")


def test_a_token_over_its_request_budget_gets_429_with_retry_after(api, make_api, settings):
    settings.CAIRN_SCAN_RATE_PER_MIN = 3 * WINDOWS_PER_MIN  # 3 per window
    _fresh_window()
    answers = [_classify(api, stderr="command not found").status_code for _ in range(3)]
    assert answers == [200, 200, 200]
    refused = _classify(api, stderr="command not found")
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= WINDOW_S
    error = refused.json()["error"]
    assert error["code"] == "rate_limited" and error["fields"] == {
        "token": ["over the per-minute scan budget"]
    }
    # Turn results share the budget; another token has its own.
    turn = api.post("/api/v1/turns/t1/results/", {"tool": "ls", "ok": True, "machine": MACHINE},
                    format="json")  # fmt: skip
    assert turn.status_code == 429
    assert _classify(make_api(), stderr="command not found").status_code == 200
    # Other endpoints are not budgeted.
    assert api.get("/api/v1/situations/known/", {"machine": MACHINE}).status_code == 200


def test_a_token_over_its_byte_budget_gets_429(api, settings):
    settings.CAIRN_SCAN_BYTES_PER_MIN = 150_000 * WINDOWS_PER_MIN
    _fresh_window()
    assert _classify(api, stderr="x" * 100_000).status_code == 200
    refused = _classify(api, stderr="x" * 100_000)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
    assert int(refused["Retry-After"]) >= 1


def test_a_body_over_the_limit_is_413_before_it_is_read(agent, settings):
    settings.CAIRN_SCAN_BODY_MAX_BYTES = 50_000
    harness = api_client(agent, scope="harness")
    response = harness.post("/api/v1/turns/t1/results/",
                            {"tool": "x", "exit_code": 1, "stderr": "y" * 60_000},
                            format="json")  # fmt: skip
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "too_large" and "body" in error["fields"]
    assert "16000" in error["message"] or "16,000" in error["message"]


def test_the_adversarial_classify_body_answers_at_once(api):
    # "the agent" + 60,000 spaces held a worker for minutes with a backtracking regex.
    response = _classify(api, stderr="the agent" + " " * 60_000)
    assert response.status_code == 200
    assert response.json()["situation"] is None
