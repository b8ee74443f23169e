"""Idempotency-Key on agent write endpoints (replay, reuse refusal, concurrency)."""

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from memory.identity.services import token_issue
from memory.models import IdempotencyRecord, Knowledge

pytestmark = pytest.mark.django_db

URL = "/api/v1/knowledge/"


def _post(api, body, key):
    return api.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_it_replays_the_first_response_and_applies_nothing_twice(api):
    body = {"content": "The staging database listens on port 6543.", "category": "fact"}
    first = _post(api, body, "k-1")
    assert first.status_code == 201, first.content
    second = _post(api, body, "k-1")
    assert second.status_code == 201
    assert second["Idempotent-Replayed"] == "true"
    assert json.loads(second.content) == first.json()
    assert Knowledge.objects.filter(workspace=api.agent.workspace).count() == 1


def test_a_reused_key_on_a_different_request_is_refused(api):
    assert (
        _post(api, {"content": "Builds run on Debian 12.", "category": "fact"}, "k-2").status_code
        == 201
    )
    other = _post(api, {"content": "Deploys happen on Fridays.", "category": "fact"}, "k-2")
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert Knowledge.objects.filter(workspace=api.agent.workspace).count() == 1


def test_a_failed_request_is_not_stored_and_may_be_retried(api):
    bad = _post(api, {"content": "", "category": "fact"}, "k-3")
    assert bad.status_code == 400
    assert not IdempotencyRecord.objects.filter(key="k-3").exists()
    good = _post(
        api, {"content": "Use pnpm, not npm, in the web repo.", "category": "preference"}, "k-3"
    )
    assert good.status_code == 201


def test_keys_are_per_agent(api, make_api):
    body = {"content": "The CI cache lives in /var/cache/ci.", "category": "fact"}
    other = make_api(workspace=api.agent.workspace)
    assert _post(api, body, "shared").status_code == 201
    second = _post(
        other, {"content": "Release notes go in CHANGES.md.", "category": "fact"}, "shared"
    )
    assert second.status_code == 201
    assert "Idempotent-Replayed" not in second


@pytest.mark.parametrize("key", ["", "x" * 201])
def test_a_malformed_key_is_a_400(api, key):
    response = _post(api, {"content": "Anything at all here.", "category": "fact"}, key)
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"Idempotency-Key": ["invalid"]}


def test_the_schema_documents_the_header(client):
    schema = client.get("/api/v1/schema/?format=json").json()
    post = schema["paths"][URL]["post"]
    assert any(p["name"] == "Idempotency-Key" and p["in"] == "header" for p in post["parameters"])


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_with_one_key_apply_once(live_server, agent):
    raw = token_issue(agent=agent).raw
    body = {"content": "Concurrent retry: the worker pool size is 8.", "category": "fact"}

    def send(_):
        return httpx.post(
            f"{live_server.url}{URL}",
            json=body,
            timeout=30,
            headers={"Authorization": f"Bearer {raw}", "Idempotency-Key": "same-key"},
        )

    with ThreadPoolExecutor(max_workers=10) as pool:
        responses = list(pool.map(send, range(10)))
    assert {r.status_code for r in responses} == {201}
    assert len({r.json()["id"] for r in responses}) == 1
    assert Knowledge.objects.filter(workspace=agent.workspace).count() == 1
