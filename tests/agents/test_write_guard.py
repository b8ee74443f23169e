"""Every agent-API write path against every secret form (rule 9) and incognito
(rule 10): the guard in agents/guard.py answers before any view runs.

The matrix is exhaustive on purpose: a new write endpoint belongs in WRITES, and a
test below fails if the served schema has a write operation WRITES does not cover.
"""

from __future__ import annotations

import base64
import logging
import urllib.parse

import pytest

from memory.models import (
    AgentTool,
    AuditEvent,
    ConversationTurn,
    FeedbackSample,
    IdempotencyRecord,
    JobRun,
    Knowledge,
    LearnedFact,
    Lesson,
    LessonEvidence,
    Outcome,
    Skill,
    SkillDelta,
    ToolCall,
)
from tests.factories.knowledge import KnowledgeFactory
from tests.factories.lessons import LessonFactory, passed_payload, step
from tests.factories.skills import harness_api

pytestmark = pytest.mark.django_db

GITHUB = "ghp_" + "Zx81Qw7Er6Ty5Ui4Op3As2Df1Gh0Jk9Lm8Nb"
SECRETS = {
    "github token": GITHUB,
    "zero-width split token": GITHUB[:9] + "\u200b" + GITHUB[9:],
    "aws secret key assignment": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE1",
    "npm token": "npm_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8",
    "base64-wrapped key": base64.b64encode(f"export TOKEN={GITHUB}".encode()).decode(),
    "url-encoded user:pass@": urllib.parse.quote("https://deploy:Hunt3r2Hunt3r2@ci.example/x"),
    "openai key": "sk-" + "proj-" + "a" * 12 + "B7c8D9e0F1g2H3i4J5k6",
    "password assignment": "password=Tr0ub4dor&3horse",
}

ROWS = (
    AgentTool,
    AuditEvent,
    ConversationTurn,
    FeedbackSample,
    IdempotencyRecord,
    JobRun,
    Knowledge,
    LearnedFact,
    Lesson,
    LessonEvidence,
    Outcome,
    Skill,
    SkillDelta,
    ToolCall,
)


def _counts():
    return {model.__name__: model.objects.count() for model in ROWS}


@pytest.fixture
def world(api, make_api):
    """The agent's three clients and one existing row of each kind a path names."""
    workspace = api.agent.workspace
    item = KnowledgeFactory(workspace=workspace, agent=api.agent, content="The cart uses uv.")
    lesson = LessonFactory(workspace=workspace, agent=api.agent)
    return {
        "agent": api,
        "harness": harness_api(api.agent),
        "admin": make_api(workspace=workspace, scope="admin", name="ops"),
        "knowledge": item.pk,
        "lesson": lesson.pk,
    }


def _outcome(**fields):
    return {**passed_payload(), **fields}


# (client, method, path, body with S where the secret goes, the field path refused)
WRITES = [
    ("agent", "post", "/api/v1/knowledge/", {"content": "S"}, "content"),
    (
        "agent",
        "post",
        "/api/v1/knowledge/",
        {"content": "ok", "metadata": {"source_url": "S"}},
        "metadata.source_url",
    ),
    (
        "agent",
        "post",
        "/api/v1/knowledge/batch/",
        {"items": [{"content": "S"}]},
        "items[0].content",
    ),
    ("agent", "patch", "/api/v1/knowledge/{knowledge}/", {"content": "S"}, "content"),
    (
        "harness",
        "post",
        "/api/v1/sessions/s1/turns/",
        {"role": "user", "content": "S", "turn_index": 0},
        "content",
    ),
    (
        "agent",
        "post",
        "/api/v1/tool-calls/",
        {
            "calls": [
                {"session_id": "s1", "tool": "sh", "operation_key": "x", "ok": False, "error": "S"}
            ]
        },
        "calls[0].error",
    ),
    (
        "harness",
        "post",
        "/api/v1/outcomes/",
        _outcome(approach=[step("pytest", "S")]),
        "approach[0].target",
    ),
    (
        "harness",
        "post",
        "/api/v1/outcomes/",
        _outcome(checks=[{"kind": "test", "label": "S", "ran": True, "exit_code": 0, "step": 2}]),
        "checks[0].label",
    ),
    ("harness", "post", "/api/v1/outcomes/", _outcome(goal="S"), "goal"),
    (
        "agent",
        "post",
        "/api/v1/evidence/",
        {"evidence_id": "S", "kind": "self_report", "target_type": "lesson", "target_id": 1},
        "evidence_id",
    ),
    (
        "agent",
        "post",
        "/api/v1/lessons/",
        {"text": "S", "operation_key": "pytest", "project_remote": "https://x.example/r.git"},
        "text",
    ),
    ("agent", "patch", "/api/v1/lessons/{lesson}/", {"text": "S"}, "text"),
    ("agent", "post", "/api/v1/lessons/{lesson}/retire/", {"reason": "S"}, "reason"),
    ("agent", "post", "/api/v1/skills/", {"skill_md": "S"}, "skill_md"),
    (
        "agent",
        "post",
        "/api/v1/skills/triage-inbox/deltas/",
        {
            "kind": "preference",
            "anchor": {"section": "escalation"},
            "payload": {"body": "Escalate after 48 hours."},
            "provenance": {"source": "user_instruction", "turns": ["S"]},
        },
        "provenance.turns[0]",
    ),
    ("agent", "put", "/api/v1/agents/me/tools/", {"tools": [{"name": "S"}]}, "tools[0].name"),
    (
        "harness",
        "post",
        "/api/v1/feedback/",
        {"action_type": "a", "scope": "s", "positive": True, "sample_id": "S"},
        "sample_id",
    ),
    ("agent", "put", "/api/v1/facts/ns/k/", {"value": {"note": "S"}}, "value.note"),
    (
        "admin",
        "post",
        "/api/v1/erasures/",
        {"selector": {"session": "s1"}, "confirm": "x", "reason": "S"},
        "reason",
    ),
    ("admin", "post", "/api/v1/exports/", {"selector": {"context": "S"}}, "selector.context"),
    (
        "harness",
        "post",
        "/api/v1/situations/",
        {"situation": {"kind": "auth", "subject": "gh", "detail": "S"}, "tool": "check"},
        "situation.detail",
    ),
    (
        "harness",
        "post",
        "/api/v1/turns/t1/results/",
        {"tool": "gh", "ok": False, "stderr": "S"},
        "stderr",
    ),
    ("admin", "post", "/api/v1/jobs/", {"kind": "S"}, "kind"),
]


def _fill(value, secret):
    if value == "S":
        return secret
    if isinstance(value, dict):
        return {k: _fill(v, secret) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, secret) for v in value]
    return value


def _send(world, client, method, path, body):
    url = path.format(knowledge=world["knowledge"], lesson=world["lesson"])
    return getattr(world[client], method)(url, body, format="json")


@pytest.mark.parametrize("form", sorted(SECRETS))
def test_every_secret_form_is_refused_on_every_write_path(world, form, caplog):
    secret = SECRETS[form]
    caplog.set_level(logging.DEBUG)
    before = _counts()
    for client, method, path, body, field in WRITES:
        response = _send(world, client, method, path, _fill(body, secret))
        where = f"{method.upper()} {path} ({field}) with a {form}"
        assert response.status_code == 422, (where, response.content[:300])
        error = response.json()["error"]
        assert error["code"] == "credential_refused", where
        assert field in error["fields"], (where, error["fields"])
        assert secret not in response.content.decode(), where
    assert _counts() == before
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert secret not in logged
    assert GITHUB not in logged


def test_a_secret_in_a_key_is_refused_too(world):
    response = world["agent"].post(
        "/api/v1/knowledge/", {"content": "ok", "metadata": {GITHUB: "x"}}, format="json"
    )
    assert response.status_code == 422
    assert not Knowledge.objects.filter(content="ok").exists()


def test_ordinary_text_still_passes_the_guard(world):
    for content in (
        "use port 5432",
        "the password policy requires 12 chars",
        "Run pytest -q from the repository root.",
        "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ):
        response = world["agent"].post("/api/v1/knowledge/", {"content": content}, format="json")
        assert response.status_code in (200, 201), (content, response.json())


def test_every_write_operation_of_the_schema_is_in_the_matrix(client):
    paths = client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    writes = {
        (method, path)
        for path, operations in paths.items()
        for method in operations
        if method in ("post", "put", "patch") and path not in READS
    }
    covered = {(method, _schema_path(path)) for _, method, path, _, _ in WRITES} | set(
        INCOGNITO_ONLY
    )
    assert writes <= covered, sorted(writes - covered)


# POSTs that read (a query, an erasure preview): nothing of them is stored. The action
# gate answers for every command (one with a secret in it too) and stores an asked
# command only with its credential withheld (tests/agents/test_actions_api.py).
READS = {
    "/api/v1/recall/",
    "/api/v1/erasures/preview/",
    "/api/v1/situations/classify/",
    "/api/v1/actions/check/",
}


def test_an_erasure_may_select_a_leaked_secret_by_text(world):
    """Erasing by text is how a secret stored before a detector knew it gets removed."""
    preview = world["admin"].post(
        "/api/v1/erasures/preview/", {"selector": {"text": GITHUB}}, format="json"
    )
    assert preview.status_code == 200, preview.json()
    start = world["admin"].post(
        "/api/v1/erasures/",
        {
            "selector": {"text": GITHUB},
            "confirm": world["agent"].agent.workspace.name,
            "reason": "a leaked token",
        },
        format="json",
    )
    assert start.status_code == 202, start.json()


def _schema_path(path: str) -> str:
    return (
        path.replace("{knowledge}", "{item_id}")
        .replace("{lesson}", "{lesson_id}")
        .replace("/sessions/s1/", "/sessions/{session_id}/")
        .replace("/turns/t1/", "/turns/{turn_id}/")
        .replace("/skills/triage-inbox/", "/skills/{name}/")
        .replace("/facts/ns/k/", "/facts/{namespace}/{key}/")
    )


# --------------------------------------------------------------------------- incognito

# Writes the secret matrix does not reach with a body of their own.
INCOGNITO_ONLY = [
    ("delete", "/api/v1/knowledge/{item_id}/"),
    # its one field is a choice (allow_once, always, deny): no text to carry a secret
    ("post", "/api/v1/actions/checks/{check_id}/answer/"),
]


def _incognito_writes():
    for client, method, path, body, _ in WRITES:
        if client == "admin":
            continue  # admin endpoints are not agent or harness writes
        yield client, method, path, {**_fill(body, "an ordinary value"), "incognito": True}
    yield "agent", "delete", "/api/v1/knowledge/{knowledge}/", {"incognito": True}


@pytest.mark.parametrize("scope", ["agent", "harness"])
def test_incognito_records_nothing_on_every_write(world, scope):
    before = _counts()
    for n, (_, method, path, body) in enumerate(_incognito_writes()):
        url = path.format(knowledge=world["knowledge"], lesson=world["lesson"])
        response = getattr(world[scope], method)(
            url, body, format="json", HTTP_IDEMPOTENCY_KEY=f"incognito-{n}"
        )
        assert response.status_code == 202, (method, path, response.content[:300])
        assert response.json() == {"recorded": False}
    assert _counts() == before  # no row, no audit entry, no idempotency replay
    assert Knowledge.objects.filter(pk=world["knowledge"], status="active").exists()


def test_incognito_must_be_a_boolean(world):
    response = world["agent"].post(
        "/api/v1/knowledge/", {"content": "x y z", "incognito": "yes"}, format="json"
    )
    assert response.status_code == 400
    assert "incognito" in response.json()["error"]["fields"]
    assert not Knowledge.objects.filter(content="x y z").exists()


def test_incognito_false_writes_as_usual(world):
    response = world["agent"].post(
        "/api/v1/knowledge/", {"content": "The cart uses pnpm.", "incognito": False}, format="json"
    )
    assert response.status_code == 201, response.json()


def test_incognito_without_a_token_is_still_401(client):
    response = client.post(
        "/api/v1/knowledge/", {"content": "x", "incognito": True}, content_type="application/json"
    )
    assert response.status_code == 401


def test_a_retry_after_incognito_with_the_same_key_is_recorded(world):
    api = world["agent"]
    first = api.post(
        "/api/v1/knowledge/",
        {"content": "The deploy runs at noon.", "incognito": True},
        format="json",
        HTTP_IDEMPOTENCY_KEY="same-key",
    )
    assert first.status_code == 202
    assert not IdempotencyRecord.objects.filter(key="same-key").exists()
    second = api.post(
        "/api/v1/knowledge/",
        {"content": "The deploy runs at noon."},
        format="json",
        HTTP_IDEMPOTENCY_KEY="same-key",
    )
    assert second.status_code == 201
    assert "Idempotent-Replayed" not in second
