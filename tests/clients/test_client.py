"""cairn_client.Cairn / AsyncCairn against a live Cairn: the operation table matches the
server's schema, writes survive retries without doubling, errors carry the server's
code, message and fields, and the project comes from the working directory."""

from __future__ import annotations

import inspect

import httpx
import pytest
from cairn_client import OPERATIONS, AsyncCairn, Cairn, CairnError, project_fields
from cairn_client.operations import METHODS

from memory.identity.projects import project_digest
from memory.models import Knowledge, Outcome
from tests.clients.conftest import run_async

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_operation_table_is_the_servers_schema(live_server):
    schema = httpx.get(f"{live_server.url}/api/v1/schema/?format=json", timeout=30).json()
    served = {
        operation["operationId"]: (method.upper(), path)
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if method in ("get", "post", "put", "patch", "delete")
    }
    assert OPERATIONS == served
    assert set(METHODS) == set(OPERATIONS)
    for name in METHODS.values():
        assert callable(getattr(Cairn, name)) and callable(getattr(AsyncCairn, name))


def test_it_remembers_and_recalls_with_the_agent_token(live_server, tokens):
    with Cairn(live_server.url, tokens["agent"]) as cairn:
        assert cairn.whoami()["scope"] == "agent"
        stored = cairn.remember("The staging database listens on port 6543.", context="work")
        hits = cairn.recall("which port does staging use", context="work")["results"]
    assert hits[0]["id"] == stored["id"]


def test_base_url_names_the_server_like_url_does(live_server, tokens, monkeypatch):
    monkeypatch.delenv("CAIRN_URL", raising=False)
    with Cairn(base_url=live_server.url, token=tokens["agent"]) as cairn:
        assert cairn.url == live_server.url and cairn.whoami()["scope"] == "agent"
    with pytest.raises(TypeError, match="url or base_url"):
        Cairn("http://a.example", token="t", base_url="http://b.example")
    monkeypatch.delenv("CAIRN_TOKEN", raising=False)
    with pytest.raises(CairnError, match="pass token= or set CAIRN_TOKEN"):
        Cairn(live_server.url)


def test_the_async_client_does_the_same(live_server, tokens):
    async def run():
        async with AsyncCairn(live_server.url, tokens["agent"]) as cairn:
            stored = await cairn.remember("Deploys happen on Tuesdays.", category="fact")
            item = await cairn.knowledge_item(stored["id"])
            return stored, item

    stored, item = run_async(run())
    assert item["content"] == "Deploys happen on Tuesdays."
    assert inspect.iscoroutinefunction(AsyncCairn._call)


def test_errors_carry_the_servers_code_message_and_fields(live_server, tokens):
    with Cairn(live_server.url, tokens["agent"], retries=0) as cairn:
        with pytest.raises(CairnError) as refused:
            cairn.remember("my key is ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")
        with pytest.raises(CairnError) as bad:
            cairn.remember("", category="fact")
    assert (refused.value.status, refused.value.code) == (422, "credential_refused")
    assert "content" in refused.value.fields
    assert bad.value.status == 400 and "content" in bad.value.fields
    assert not Knowledge.objects.exists()


class DropFirstResponse(httpx.HTTPTransport):
    """The server answers, then the network drops the answer (once)."""

    def __init__(self):
        super().__init__()
        self.sent = []

    def handle_request(self, request):
        response = super().handle_request(request)
        self.sent.append(request.headers.get("Idempotency-Key"))
        if len(self.sent) == 1:
            response.read()
            raise httpx.ReadError("connection reset after the server answered")
        return response


def test_a_retried_write_is_applied_once(live_server, tokens):
    transport = DropFirstResponse()
    with Cairn(live_server.url, tokens["agent"], transport=transport, backoff=0.01) as cairn:
        stored = cairn.remember("Reviews happen in the morning.", category="preference")
    assert len(transport.sent) == 2 and transport.sent[0] == transport.sent[1]
    assert Knowledge.objects.filter(content="Reviews happen in the morning.").count() == 1
    assert stored["id"] == Knowledge.objects.get().pk


class BusyOnce(httpx.HTTPTransport):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def handle_request(self, request):
        self.calls += 1
        if self.calls == 1:
            return httpx.Response(
                503,
                headers={"Retry-After": "0"},
                json={"error": {"code": "unavailable", "message": "busy"}},
            )
        return super().handle_request(request)


def test_it_retries_a_503_and_gives_up_with_the_servers_error(live_server, tokens):
    transport = BusyOnce()
    with Cairn(live_server.url, tokens["agent"], transport=transport, backoff=0.01) as cairn:
        assert cairn.whoami()["agent"]
    assert transport.calls == 2
    with Cairn("http://127.0.0.1:9", tokens["agent"], retries=1, backoff=0.01) as cairn:
        with pytest.raises(CairnError) as down:
            cairn.whoami()
    assert down.value.code == "unreachable" and down.value.status is None


def test_the_project_comes_from_the_git_remote_then_the_path(
    live_server, tokens, repo, tmp_path, monkeypatch
):
    assert project_fields(cwd=str(repo)) == {"project_remote": "https://github.com/acme/shop.git"}
    assert project_fields(cwd=str(tmp_path)) == {"project_path": str(tmp_path)}
    monkeypatch.chdir(repo)
    with Cairn(live_server.url, tokens["harness"]) as cairn:
        cairn.post_outcome({"outcome_id": "o-1", "session_id": "s-1"})
    assert Outcome.objects.get().project_digest == project_digest(
        remote="https://github.com/acme/shop.git"
    )
