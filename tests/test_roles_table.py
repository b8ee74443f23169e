"""Roles from one table, default deny (memory/identity/roles.py), enumerated from the code.

The routes come from the URL resolver and the API's operations from its schema, never
from a list here: a new page or endpoint that is not in the table fails the first
tests, and one whose behaviour differs from its declaration fails the crossings.

- every route of the review UI, requested by nobody, by a signed-in person of another
  workspace, and by a viewer, a reviewer and an admin, with GET and POST: refused
  (login page, 403, or 204 for a background poll) exactly when the table says so;
- every operation of the agent API schema, with no token and with an agent, harness
  and admin token: 401/403 exactly when the table says so.
"""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator

from memory.identity import roles
from tests.factories.identity import AgentFactory, WorkspaceFactory, api_client

pytestmark = pytest.mark.django_db

MEMBER_ROLES = (roles.VIEWER, roles.REVIEWER, roles.ADMIN)
#: Django's own admin site: staff only, behind its own login view.
DJANGO_ADMIN = "admin"


def _walk(patterns, prefix="", namespace=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            inner = ":".join(filter(None, [namespace, entry.namespace or ""]))
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern), inner)
        elif isinstance(entry, URLPattern):
            yield namespace, entry.name, prefix + str(entry.pattern)


def _concrete(pattern: str) -> str:
    """A URL for a route pattern: ids that exist nowhere, names that match nothing."""
    path = re.sub(r"\(\?P<\w+>\[0-9a-f\]\{64\}\)", "0" * 64, pattern)
    path = re.sub(r"<int:\w+>", "987654", path)
    path = re.sub(r"<(?:str|slug|path):\w+>", "nothing", path)
    path = re.sub(r"<\w+>", "nothing", path)
    path = re.sub(r"\(\?P<\w+>\.\*\)", "", path)
    return "/" + path.lstrip("^").rstrip("$")


ROUTES = list(_walk(get_resolver().url_patterns))
UI = [(name, _concrete(p)) for ns, name, p in ROUTES if ns == "reviews"]
SITE = [(name, _concrete(p)) for ns, name, p in ROUTES if ns == ""]


def test_every_route_of_every_namespace_is_in_the_table():
    namespaces = {ns for ns, _, _ in ROUTES}
    assert namespaces <= {"", "reviews", "agents", DJANGO_ADMIN}, namespaces
    ui = {name for ns, name, _ in ROUTES if ns == "reviews"}
    api = {name for ns, name, _ in ROUTES if ns == "agents"}
    site = {name for ns, name, _ in ROUTES if ns == ""}
    assert ui == set(roles.UI_ROLES), "UI routes and the roles table differ"
    assert api == set(roles.API_SCOPES), "API routes and the roles table differ"
    assert site == set(roles.SITE_ROUTES), "site routes and the roles table differ"
    assert roles.UI_POLLS <= ui


def test_no_view_states_a_second_role():
    """The role is the table's: a view decorated ``@require_role("x")`` is a second
    declaration that could drift (the decorator refuses a mismatch at request time)."""
    stated = [
        name
        for ns, name, _ in ROUTES
        if ns == "reviews"
        and getattr(get_resolver().resolve(_concrete_for(name)).func, "role_stated", None)
    ]
    assert stated == []


def _concrete_for(name: str) -> str:
    return dict(UI)[name]


def test_every_section_has_words_and_every_role_a_line():
    for name in roles.UI_ROLES:
        assert roles.section_of(name) in roles.SECTION_WORDS, name
    lines = dict(roles.role_lines())
    assert set(lines) == set(MEMBER_ROLES)
    assert "exports" in lines[roles.ADMIN] and "exports" not in lines[roles.REVIEWER]
    assert "staged skill changes" in lines[roles.REVIEWER]
    assert dict(roles.scope_lines())["admin"].count("exports") == 1


def _refused(response, *, poll: bool) -> bool:
    if poll:
        return response.status_code == 204
    if response.status_code == 403:
        return True
    return response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.fixture
def people(django_user_model):
    from django.test import Client

    from memory.identity.services import user_create

    workspace = WorkspaceFactory()
    out = {"nobody": Client()}
    for role in MEMBER_ROLES:
        user, _ = user_create(workspace=workspace, username=f"p-{role}", role=role, password="x")
        c = Client()
        c.force_login(user)
        out[role] = c
    # Signed in, member of no workspace: every page that needs a role refuses.
    outsider = Client()
    outsider.force_login(django_user_model.objects.create_user("p-outsider", password="x"))
    out["outsider"] = outsider
    return out


@pytest.mark.parametrize("who", ["nobody", "outsider", *MEMBER_ROLES])
def test_every_ui_route_answers_each_role_as_the_table_says(people, who):
    client = people[who]
    wrong = []
    for name, url in UI:
        needed = roles.UI_ROLES[name]
        poll = name in roles.UI_POLLS
        if who == "nobody":
            expect_refused = needed != roles.PUBLIC
        elif who == "outsider":
            if needed == roles.SIGNED_IN:
                continue  # the view itself says "not in any workspace"
            expect_refused = True
        else:
            expect_refused = not roles.role_allows(held=who, needed=needed)
        for method in ("get", "post"):
            response = getattr(client, method)(url)
            refused = _refused(response, poll=poll)
            if refused != expect_refused:
                wrong.append((method.upper(), url, needed, response.status_code))
    assert wrong == [], f"{who}: {wrong}"


def test_site_routes_are_public_exactly_as_declared(client):
    for name, url in SITE:
        response = client.get(url)
        to_login = response.status_code == 302 and response["Location"].startswith("/login/")
        assert not to_login and response.status_code != 403, (name, url)
    admin = client.get("/admin/")
    assert admin.status_code == 302 and "login" in admin["Location"]


def _operations():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, methods in schema["paths"].items():
        for method in methods:
            if method in ("get", "post", "put", "patch", "delete"):
                yield method, path


OPERATIONS = sorted(set(_operations()))


def test_the_schema_has_operations_for_every_declared_api_route():
    assert len(OPERATIONS) >= len(roles.API_SCOPES)


@pytest.mark.parametrize("scope", [None, "agent", "harness", "admin"])
def test_every_api_operation_answers_each_token_scope_as_the_table_says(scope):
    from django.urls import resolve
    from rest_framework.test import APIClient

    agent = AgentFactory(workspace=WorkspaceFactory())
    client = APIClient() if scope is None else api_client(agent, scope=scope)
    wrong = []
    for method, path in OPERATIONS:
        url = re.sub(r"\{[^}]+_id\}", "987654", path)
        url = re.sub(r"\{[^}]+\}", "nothing", url)
        match = resolve(url)
        scopes = roles.api_scopes(match.url_name)
        response = getattr(client, method)(url, {}, format="json")
        if match.namespace != "agents":
            assert roles.SITE_ROUTES[match.url_name] == roles.PUBLIC
            ok = response.status_code not in (401, 403)
        elif scope is None:
            ok = response.status_code == 401
        elif scope in scopes:
            ok = response.status_code not in (401, 403)
        else:
            ok = response.status_code == 403
        if not ok:
            wrong.append((method.upper(), url, sorted(scopes), response.status_code))
    assert wrong == [], f"{scope}: {wrong}"
