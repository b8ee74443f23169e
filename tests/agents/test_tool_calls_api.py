"""POST /api/v1/tool-calls/ (error items per failing operation) and GET /api/v1/tool-calls/stats/."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import Knowledge, ToolCall
from tests.factories.knowledge import ToolCallFactory

pytestmark = pytest.mark.django_db

GITHUB_TOKEN = "ghp_" + "Zz98" * 9


def _calls(api, *calls):
    return api.post("/api/v1/tool-calls/", {"calls": list(calls)}, format="json")


def _call(**fields):
    return {"session_id": "s-1", "tool": "shell", "operation_key": "pytest", "ok": True, **fields}


def _error(response):
    return response.json()["error"]


def test_it_logs_a_batch_of_tool_calls(api):
    response = _calls(api, _call(duration_ms=120), _call(tool="http", operation_key="GET /status"))
    assert response.status_code == 201
    assert response.json()["recorded"] is True and response.json()["count"] == 2
    assert ToolCall.objects.filter(workspace=api.agent.workspace).count() == 2


def test_a_failure_stores_one_error_item_per_operation(api):
    response = _calls(api, _call(ok=False, error="3 tests failed: db missing"))
    item_id = response.json()["error_items"][0]
    item = Knowledge.objects.get(pk=item_id)
    assert (item.category, item.source, item.operation_key, item.status) == (
        "error",
        "error_auto",
        "pytest",
        "active",
    )
    assert "db missing" in item.content and item.embedding is not None
    again = _calls(api, _call(ok=False, error="2 tests failed: port in use"))
    assert again.json()["error_items"] == [item_id]
    item.refresh_from_db()
    assert item.metadata["failures"] == 2 and "port in use" in item.content
    assert Knowledge.objects.filter(category="error").count() == 1


def test_a_later_success_archives_the_error_item(api):
    item_id = _calls(api, _call(ok=False, error="boom")).json()["error_items"][0]
    response = _calls(api, _call(ok=True))
    assert response.json()["resolved_items"] == [item_id]
    item = Knowledge.objects.get(pk=item_id)
    assert item.status == "archived" and item.metadata["archived_by"] == "success"
    recall = api.post("/api/v1/recall/", {"query": "pytest boom"}, format="json").json()
    assert item_id not in [r["id"] for r in recall["results"]]


def test_a_success_older_than_the_failure_does_not_archive_it(api):
    now = timezone.now()
    item_id = _calls(api, _call(ok=False, error="boom", at=now.isoformat())).json()["error_items"][
        0
    ]
    _calls(api, _call(ok=True, at=(now - timedelta(minutes=5)).isoformat()))
    assert Knowledge.objects.get(pk=item_id).status == "active"


def test_a_failure_fixed_later_in_the_same_batch_leaves_no_active_error(api):
    now = timezone.now()
    response = _calls(
        api,
        _call(ok=True, at=(now + timedelta(seconds=1)).isoformat()),
        _call(ok=False, error="flaky", at=now.isoformat()),
    )
    assert response.status_code == 201
    assert not Knowledge.objects.filter(category="error", status="active").exists()


def test_a_new_failure_after_a_fix_reopens_the_same_item(api):
    item_id = _calls(api, _call(ok=False, error="first")).json()["error_items"][0]
    _calls(api, _call(ok=True))
    reopened = _calls(api, _call(ok=False, error="second")).json()["error_items"]
    assert reopened == [item_id]
    assert Knowledge.objects.get(pk=item_id).status == "active"
    assert Knowledge.objects.filter(category="error").count() == 1


def test_a_failure_never_rewrites_an_error_item_a_person_sealed(api):
    sealed = Knowledge.objects.create(
        workspace=api.agent.workspace,
        content="pytest needs `make db` first (written by Sam)",
        category="error",
        operation_key="pytest",
        sealed=True,
    )
    assert _calls(api, _call(ok=False, error="db missing")).json()["error_items"] == [sealed.pk]
    sealed.refresh_from_db()
    assert sealed.content == "pytest needs `make db` first (written by Sam)"
    assert sealed.metadata["failures"] == 1
    _calls(api, _call(ok=True))
    sealed.refresh_from_db()
    assert sealed.status == "active"  # a success does not archive what a person sealed


def test_incognito_tool_calls_record_nothing(api):
    response = _calls(api, _call(ok=False, error="secret stuff", incognito=True))
    assert response.status_code == 202
    assert response.json()["recorded"] is False
    assert not ToolCall.objects.exists() and not Knowledge.objects.exists()


def test_a_credential_in_a_tool_error_refuses_the_whole_batch(api):
    response = _calls(
        api, _call(), _call(ok=False, error="push failed for https://x:" + GITHUB_TOKEN + "@gh")
    )
    assert response.status_code == 422
    assert list(_error(response)["fields"]) == ["calls[1].error"]
    assert not ToolCall.objects.exists() and not Knowledge.objects.exists()


@pytest.mark.parametrize(
    ("calls", "field"),
    [
        ([], "calls"),
        ([{"session_id": "s", "tool": "t", "ok": True}], "calls[0].operation_key"),
        ([_call(ok="maybe")], "calls[0].ok"),
        ([_call(duration_ms=-5)], "calls[0].duration_ms"),
        ([_call(error="e" * 2001)], "calls[0].error"),
    ],
)
def test_tool_call_validation_errors_are_400s(api, calls, field):
    response = _calls(api, *calls)
    assert response.status_code == 400
    assert field in _error(response)["fields"]
    assert not ToolCall.objects.exists()


def test_stats_give_success_rates_and_recent_errors(api):
    ws = api.agent.workspace
    now = timezone.now()
    for i, ok in enumerate([True, True, True, False]):
        ToolCallFactory(
            workspace=ws,
            tool="shell",
            ok=ok,
            duration_ms=100,
            error="" if ok else "exit 1",
            at=now - timedelta(minutes=10 - i),
        )
    ToolCallFactory(workspace=ws, tool="http", ok=False, error="timeout", at=now)
    ToolCallFactory(tool="other-ws", ok=False)  # in a workspace of its own
    body = api.get("/api/v1/tool-calls/stats/").json()
    by_tool = {t["tool"]: t for t in body["tools"]}
    assert set(by_tool) == {"http", "shell"}
    assert (by_tool["shell"]["total"], by_tool["shell"]["success_rate"]) == (4, 0.75)
    assert by_tool["shell"]["avg_duration_ms"] == 100.0
    assert by_tool["shell"]["last_error"] == "exit 1"
    assert by_tool["http"]["success_rate"] == 0.0
    assert [e["error"] for e in body["recent_errors"]] == ["timeout", "exit 1"]
    only = api.get("/api/v1/tool-calls/stats/", {"tool": "http"}).json()
    assert [t["tool"] for t in only["tools"]] == ["http"]
    assert api.get("/api/v1/tool-calls/stats/", {"since": "soon"}).status_code == 400


def test_tool_calls_and_error_items_stay_in_their_workspace(api, make_api):
    _calls(api, _call(ok=False, error="boom"))
    other = make_api()
    assert other.get("/api/v1/tool-calls/stats/").json() == {"tools": [], "recent_errors": []}
    # B's success on the same operation key does not resolve A's error item.
    _calls(other, _call(ok=True))
    assert Knowledge.objects.get(category="error").status == "active"


def test_an_agent_tokens_success_does_not_archive_what_the_harness_saw_fail(api, harness):
    """The model saying a call passed is its word: the harness's error item stays."""
    item_id = _calls(harness, _call(ok=False, error="boom")).json()["error_items"][0]
    response = _calls(api, _call(ok=True))
    assert response.status_code == 201 and response.json()["resolved_items"] == []
    assert Knowledge.objects.get(pk=item_id).status == "active"
    # A harness success does archive it.
    assert _calls(harness, _call(ok=True)).json()["resolved_items"] == [item_id]


def test_an_agent_tokens_later_success_does_not_cancel_a_harness_failure(api, harness):
    now = timezone.now()
    _calls(api, _call(ok=True, at=now.isoformat()))
    failed = _calls(
        harness, _call(ok=False, error="boom", at=(now - timedelta(minutes=1)).isoformat())
    )
    assert len(failed.json()["error_items"]) == 1
    assert Knowledge.objects.get(pk=failed.json()["error_items"][0]).status == "active"


def test_an_agent_reported_error_item_the_harness_also_saw_fail_is_the_harnesss(api, harness):
    item_id = _calls(api, _call(ok=False, error="boom")).json()["error_items"][0]
    assert Knowledge.objects.get(pk=item_id).channel == "agent"
    assert _calls(harness, _call(ok=False, error="boom again")).json()["error_items"] == [item_id]
    # the harness saw it fail; its words stay the tool's output (quoted, SPEC section 4a)
    assert Knowledge.objects.get(pk=item_id).channel == "harness"
    assert _calls(api, _call(ok=True)).json()["resolved_items"] == []
    assert Knowledge.objects.get(pk=item_id).status == "active"
