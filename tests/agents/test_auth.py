import pytest
from django.core.management import call_command

from memory.identity.services import token_digest, token_issue, token_revoke
from memory.models import ApiToken, AuditEvent
from tests.factories.identity import person_actor

pytestmark = pytest.mark.django_db


def test_it_authenticates_a_valid_token(api):
    response = api.get("/api/v1/agents/me/")
    assert response.status_code == 200
    assert response.json() == {
        "agent": api.agent.name,
        "workspace": api.agent.workspace.name,
        "scope": "agent",
    }


def test_it_stores_only_the_digest(api):
    token = ApiToken.objects.get(pk=api.token.pk)
    assert token.digest == token_digest(api.raw_token)
    assert api.raw_token not in {token.digest, token.prefix, token.name}
    assert api.raw_token.startswith(f"cairn_{token.prefix}_")


def test_it_records_last_use(api):
    assert ApiToken.objects.get(pk=api.token.pk).last_used_at is None
    api.get("/api/v1/agents/me/")
    assert ApiToken.objects.get(pk=api.token.pk).last_used_at is not None


def test_a_revoked_token_is_refused(api):
    token_revoke(token=api.token, actor=person_actor("test"))
    response = api.get("/api/v1/agents/me/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"
    assert response["WWW-Authenticate"] == "Bearer"
    assert AuditEvent.objects.filter(action="token.revoke", target_id=str(api.token.pk)).exists()


def test_it_refuses_no_token_with_the_error_shape(client):
    response = client.get("/api/v1/agents/me/")
    assert response.status_code == 401
    body = response.json()
    assert set(body["error"]) == {"code", "message", "fields"}
    assert body["error"]["code"] == "not_authenticated"


@pytest.mark.parametrize(
    "header", ["Token abc", "Bearer", "Bearer a b", "Bearer cairn_nope_x", "Basic Zm9vOmJhcg=="]
)
def test_it_refuses_malformed_or_unknown_tokens(client, header):
    response = client.get("/api/v1/agents/me/", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response.json()["error"]["code"] in {"authentication_failed", "not_authenticated"}


def test_admin_scope_is_reported(agent, client):
    issued = token_issue(agent=agent, scope="admin")
    response = client.get("/api/v1/agents/me/", HTTP_AUTHORIZATION=f"Bearer {issued.raw}")
    assert response.json()["scope"] == "admin"


def test_create_agent_prints_a_working_token_last(client, capsys):
    call_command("create_agent", "acme", "gaia/chat", "--create-workspace")
    raw = capsys.readouterr().out.strip().splitlines()[-1]
    response = client.get("/api/v1/agents/me/", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 200
    assert response.json() == {"agent": "gaia/chat", "workspace": "acme", "scope": "agent"}
    call_command("create_agent", "acme", "gaia/chat", "--admin")
    raw_admin = capsys.readouterr().out.strip().splitlines()[-1]
    assert raw_admin != raw
    response = client.get("/api/v1/agents/me/", HTTP_AUTHORIZATION=f"Bearer {raw_admin}")
    assert response.json()["scope"] == "admin"
    assert ApiToken.objects.filter(agent__name="gaia/chat").count() == 2


def test_create_user_prints_a_password_that_logs_in(client, capsys):
    call_command("create_user", "acme", "sam", "reviewer", "--create-workspace")
    password = capsys.readouterr().out.strip().splitlines()[-1]
    response = client.post("/login/", {"username": "sam", "password": password})
    assert response.status_code == 302
    response = client.get("/dashboard/")
    assert response.status_code == 200
    assert b"acme" in response.content
