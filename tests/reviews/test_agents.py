"""Agents and tokens screen: admin only, tokens shown once, revoke with a reason."""

import pytest
from django.test import Client

from memory.identity.services import token_digest, token_issue
from memory.models import Agent, ApiToken, AuditEvent
from tests.factories.identity import AgentFactory, WorkspaceFactory
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def admin(member_client, workspace):
    return member_client(workspace=workspace, role="admin")


def _raw_tokens(html: str) -> list[str]:
    import re

    return re.findall(r"cairn_[0-9a-f]{8}_[A-Za-z0-9_-]{20,}", html)


# --- the list ---------------------------------------------------------------


def test_it_lists_agents_with_their_tokens_as_a_full_page(admin, workspace):
    agent = AgentFactory(workspace=workspace, name="gaia/chat")
    issued = token_issue(agent=agent, name="laptop")
    response = admin.get("/agents/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and 'id="rows"' in html
    assert "gaia/chat" in html
    assert f"cairn_{issued.token.prefix}_…" in html
    assert "laptop" in html
    assert issued.raw not in html  # never shown again after issuing
    assert response["Vary"].count("HX-Request") == 1


def test_it_serves_the_rows_fragment_to_htmx(admin, workspace):
    AgentFactory(workspace=workspace, name="gaia/chat")
    response = admin.get("/agents/", **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html
    assert html.lstrip().startswith('<div id="rows">')
    assert "gaia/chat" in html


def test_it_filters_agents_by_name(admin, workspace):
    AgentFactory(workspace=workspace, name="gaia/chat")
    AgentFactory(workspace=workspace, name="claude-code")
    html = admin.get("/agents/?q=gaia", **HX).content.decode()
    assert "gaia/chat" in html and "claude-code" not in html
    empty = admin.get("/agents/?q=nobody", **HX).content.decode()
    assert "No agent matches" in empty


def test_an_empty_workspace_says_what_to_do(admin):
    html = admin.get("/agents/").content.decode()
    assert "No agents yet." in html
    assert "Create one above" in html


def test_it_pages_agents_without_losing_any(admin, workspace):
    for i in range(7):
        AgentFactory(workspace=workspace, name=f"agent-{i:02d}")
    first = admin.get("/agents/?size=3").context["page"]
    assert [a.name for a in first] == ["agent-00", "agent-01", "agent-02"]
    second = admin.get(f"/agents/{first.next_query}", **HX).context["page"]
    assert [a.name for a in second] == ["agent-03", "agent-04", "agent-05"]
    third = admin.get(f"/agents/{second.next_query}").context["page"]
    assert [a.name for a in third] == ["agent-06"]
    assert third.next_cursor is None
    back = admin.get(f"/agents/{third.prev_query}").context["page"]
    assert [a.name for a in back] == ["agent-03", "agent-04", "agent-05"]


# --- creating an agent ----------------------------------------------------------


def test_an_admin_creates_an_agent_via_htmx(admin, workspace):
    response = admin.post("/agents/new/", {"name": "  gaia/chat "}, **HX)
    assert response.status_code == 200
    agent = Agent.objects.get(workspace=workspace, name="gaia/chat")
    html = response.content.decode()
    assert 'id="agent-form"' in html  # a fresh, empty form
    assert f'<section class="card agent" id="agent-{agent.pk}"' in html
    assert 'hx-swap-oob="afterbegin:#agent-cards"' in html
    assert 'id="nav" class="nav" aria-label="Main" hx-swap-oob="true"' in html
    assert 'id="toasts" hx-swap-oob="beforeend"' in html and "gaia/chat created" in html
    event = AuditEvent.objects.get(action="agent.create", target_id=str(agent.pk))
    assert event.actor == f"user:{admin.user.username}"
    assert event.workspace == workspace


def test_creating_without_htmx_redirects_to_the_list(admin, workspace):
    response = admin.post("/agents/new/", {"name": "gaia/chat"})
    assert response.status_code == 303
    assert response["Location"] == f"/agents/?ws={workspace.name}"
    page = admin.get("/agents/").content.decode()
    assert "gaia/chat created" in page  # the flash message, shown once as a toast


@pytest.mark.parametrize(
    ("name", "message"),
    [("", "1-128 characters"), ("two words", "spaces"), ("x" * 129, "1-128 characters")],
)
def test_a_bad_agent_name_is_refused_with_the_form_and_its_error(admin, name, message):
    response = admin.post("/agents/new/", {"name": name}, **HX)
    assert response.status_code == 422
    html = response.content.decode()
    assert 'id="agent-form"' in html and 'aria-invalid="true"' in html
    assert message in html
    assert not Agent.objects.exists()


def test_a_duplicate_agent_name_is_refused(admin, workspace):
    AgentFactory(workspace=workspace, name="gaia/chat")
    response = admin.post("/agents/new/", {"name": "gaia/chat"}, **HX)
    assert response.status_code == 422
    assert "already exists" in response.content.decode()
    assert Agent.objects.filter(workspace=workspace).count() == 1


def test_the_same_name_in_another_workspace_is_fine(admin, workspace):
    AgentFactory(workspace=WorkspaceFactory(), name="gaia/chat")
    assert admin.post("/agents/new/", {"name": "gaia/chat"}, **HX).status_code == 200


# --- issuing a token --------------------------------------------------------------


def test_an_admin_issues_a_token_and_sees_it_once(admin, workspace):
    agent = AgentFactory(workspace=workspace)
    response = admin.post(f"/agents/{agent.pk}/tokens/", {"name": "laptop", "scope": "agent"}, **HX)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    html = response.content.decode()
    raws = _raw_tokens(html)
    assert len(set(raws)) == 1
    token = ApiToken.objects.get(agent=agent)
    assert token.digest == token_digest(raws[0])
    assert token.name == "laptop" and token.created_by == admin.user
    assert 'hx-history="false"' in html  # never copied into htmx's history cache
    assert f'id="agent-{agent.pk}"' in html and f'id="token-{token.pk}"' in html
    assert 'id="nav-active-tokens" title="active tokens">1<' in html
    # Shown once: neither the list page nor its fragment shows it again.
    assert raws[0] not in admin.get("/agents/").content.decode()
    assert raws[0] not in admin.get("/agents/", **HX).content.decode()
    event = AuditEvent.objects.get(action="token.issue", target_id=str(token.pk))
    assert event.actor == f"user:{admin.user.username}"
    assert raws[0] not in str(event.details)


def test_the_new_token_works_against_the_api(admin, workspace):
    agent = AgentFactory(workspace=workspace)
    html = admin.post(f"/agents/{agent.pk}/tokens/", {"scope": "admin"}, **HX).content.decode()
    raw = _raw_tokens(html)[0]
    response = Client().get("/api/v1/agents/me/", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 200
    assert response.json()["scope"] == "admin"


def test_issuing_without_htmx_shows_the_token_on_the_page(admin, workspace):
    agent = AgentFactory(workspace=workspace)
    response = admin.post(f"/agents/{agent.pk}/tokens/", {"scope": "agent"})
    assert response.status_code == 200  # no redirect: the raw token lives only here
    assert "no-store" in response["Cache-Control"]
    html = response.content.decode()
    assert "<html" in html and len(set(_raw_tokens(html))) == 1


def test_an_unknown_scope_is_refused(admin, workspace):
    agent = AgentFactory(workspace=workspace)
    response = admin.post(f"/agents/{agent.pk}/tokens/", {"scope": "root"}, **HX)
    assert response.status_code == 422
    assert "Unknown token scope" in response.content.decode()
    assert not ApiToken.objects.exists()


# --- revoking a token -----------------------------------------------------------


def test_an_admin_revokes_a_token_with_a_reason(admin, workspace):
    agent = AgentFactory(workspace=workspace)
    issued = token_issue(agent=agent)
    response = admin.post(
        f"/agents/tokens/{issued.token.pk}/revoke/", {"reason": "laptop lost"}, **HX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith(f'<tr id="token-{issued.token.pk}" class="revoked">')
    assert 'id="nav-active-tokens" title="active tokens">0<' in html  # counter, out of band
    assert "revoked. Requests with it now get 401" in html  # the toast, out of band
    issued.token.refresh_from_db()
    assert issued.token.revoked_at is not None
    event = AuditEvent.objects.get(action="token.revoke", target_id=str(issued.token.pk))
    assert event.reason == "laptop lost"
    assert event.actor == f"user:{admin.user.username}"
    api = Client().get("/api/v1/agents/me/", HTTP_AUTHORIZATION=f"Bearer {issued.raw}")
    assert api.status_code == 401


@pytest.mark.parametrize("reason", ["", "   "])
def test_revoking_needs_a_reason(admin, workspace, reason):
    issued = token_issue(agent=AgentFactory(workspace=workspace))
    response = admin.post(f"/agents/tokens/{issued.token.pk}/revoke/", {"reason": reason}, **HX)
    assert response.status_code == 422
    html = response.content.decode()
    assert "Say why" in html
    assert '<details class="confirm" open>' in html
    issued.token.refresh_from_db()
    assert issued.token.revoked_at is None
    assert not AuditEvent.objects.filter(action="token.revoke").exists()


def test_revoking_without_htmx_redirects_with_a_message(admin, workspace):
    issued = token_issue(agent=AgentFactory(workspace=workspace))
    response = admin.post(f"/agents/tokens/{issued.token.pk}/revoke/", {"reason": "rotated"})
    assert response.status_code == 303
    assert "revoked" in admin.get("/agents/").content.decode()


def test_revoking_twice_changes_nothing_the_second_time(admin, workspace):
    issued = token_issue(agent=AgentFactory(workspace=workspace))
    url = f"/agents/tokens/{issued.token.pk}/revoke/"
    admin.post(url, {"reason": "first"}, **HX)
    first = ApiToken.objects.get(pk=issued.token.pk).revoked_at
    response = admin.post(url, {"reason": "second"}, **HX)
    assert response.status_code == 200
    assert "already revoked" in response.content.decode()
    assert ApiToken.objects.get(pk=issued.token.pk).revoked_at == first
    assert AuditEvent.objects.filter(action="token.revoke").count() == 1


# --- who may do what ---------------------------------------------------------------


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_non_admins_cannot_see_or_change_agents_and_tokens(member_client, workspace, role):
    agent = AgentFactory(workspace=workspace)
    issued = token_issue(agent=agent)
    client = member_client(workspace=workspace, role=role)
    assert client.get("/agents/").status_code == 403
    assert client.get("/agents/", **HX).status_code == 403
    assert client.post("/agents/new/", {"name": "sneaky"}, **HX).status_code == 403
    assert client.post(f"/agents/{agent.pk}/tokens/", {"scope": "admin"}).status_code == 403
    revoke = client.post(f"/agents/tokens/{issued.token.pk}/revoke/", {"reason": "x"})
    assert revoke.status_code == 403
    assert Agent.objects.filter(workspace=workspace).count() == 1
    assert ApiToken.objects.filter(agent=agent).count() == 1
    assert ApiToken.objects.get(pk=issued.token.pk).revoked_at is None
    assert "Agents &amp; tokens" not in client.get("/dashboard/").content.decode()


def test_admins_see_the_agents_link(admin):
    assert 'href="/agents/"' in without_ws(admin.get("/dashboard/").content.decode())


def test_anonymous_people_are_sent_to_log_in(client, workspace):
    assert client.get("/agents/")["Location"].startswith("/login/")
    response = client.post("/agents/new/", {"name": "x"})
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert not Agent.objects.exists()


def test_other_workspaces_agents_and_tokens_are_invisible_and_404(admin, workspace):
    other = WorkspaceFactory()
    their_agent = AgentFactory(workspace=other, name="their-agent")
    their_token = token_issue(agent=their_agent).token
    assert "their-agent" not in admin.get("/agents/").content.decode()
    assert "their-agent" not in admin.get("/agents/?q=their", **HX).content.decode()
    assert admin.post(f"/agents/{their_agent.pk}/tokens/", {}, **HX).status_code == 404
    revoke = admin.post(f"/agents/tokens/{their_token.pk}/revoke/", {"reason": "x"}, **HX)
    assert revoke.status_code == 404
    assert ApiToken.objects.filter(agent=their_agent).count() == 1
    assert ApiToken.objects.get(pk=their_token.pk).revoked_at is None
    # A missing id answers exactly the same.
    missing = admin.post("/agents/tokens/999999/revoke/", {"reason": "x"}, **HX)
    assert missing.status_code == 404


def test_state_changing_views_refuse_get(admin, workspace):
    agent = AgentFactory(workspace=workspace)
    issued = token_issue(agent=agent)
    assert admin.get("/agents/new/").status_code == 405
    assert admin.get(f"/agents/{agent.pk}/tokens/").status_code == 405
    assert admin.get(f"/agents/tokens/{issued.token.pk}/revoke/").status_code == 405
    assert ApiToken.objects.get(pk=issued.token.pk).revoked_at is None


def test_csrf_is_enforced_on_actions(workspace):
    from memory.identity.services import user_create

    user, _ = user_create(workspace=workspace, username="boss", role="admin", password="pw")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post("/agents/new/", {"name": "forged"}, **HX)
    assert response.status_code == 403
    assert not Agent.objects.exists()
    # With the token from the page (as htmx sends it, in a header) it goes through.
    page = client.get("/agents/")
    token = page.context["csrf_token"]
    ok = client.post("/agents/new/", {"name": "real"}, HTTP_X_CSRFTOKEN=str(token), **HX)
    assert ok.status_code == 200
    assert Agent.objects.filter(name="real").exists()


def test_the_list_query_count_is_pinned(admin, workspace, django_assert_max_num_queries):
    for i in range(30):
        token_issue(agent=AgentFactory(workspace=workspace, name=f"a{i:02d}"))
    admin.get("/agents/")
    # session, user, membership, agents page, their tokens (one prefetch), memberships,
    # nav counters (4: tokens, jobs, delta queues, open contradictions)
    with django_assert_max_num_queries(10):
        assert admin.get("/agents/").status_code == 200
    with django_assert_max_num_queries(5):
        assert admin.get("/agents/", **HX).status_code == 200
