"""Ended sessions, refused requests and login throttling in the review UI."""

import pytest
from django.test import Client

from memory.identity.services import user_create
from tests.factories.identity import WorkspaceFactory

pytestmark = pytest.mark.django_db


def test_an_htmx_action_from_an_ended_session_redirects_the_whole_page(member_client):
    client = member_client(workspace=WorkspaceFactory(), role="reviewer")
    client.logout()  # logged out elsewhere; the tab still shows the page
    response = client.post(
        "/lessons/1/retire/",
        {"reason": "x"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL="http://testserver/lessons/?q=a",
    )
    assert response.status_code == 200
    # The page keeps its query (a ?ws= above all), so login returns to the same view.
    assert response["HX-Redirect"] == "/login/?next=/lessons/%3Fq%3Da"
    assert "session has ended" in response["X-Cairn-Message"]
    assert b"password" not in response.content  # no login form swapped into a card


def test_without_htmx_it_is_the_usual_redirect_to_login():
    response = Client().get("/lessons/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_a_stale_csrf_token_says_so_not_role():
    workspace = WorkspaceFactory()
    user, _ = user_create(workspace=workspace, username="rev", role="reviewer", password="pw-1")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post("/lessons/1/retire/", {"reason": "x"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 403
    assert "security token is out of date" in response["X-Cairn-Message"]
    assert b"security token is out of date" in response.content


def test_a_role_refusal_names_the_role(member_client):
    client = member_client(workspace=WorkspaceFactory(), role="viewer")
    response = client.post("/lessons/1/retire/", {"reason": "x"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 403
    assert response["X-Cairn-Message"] == "This needs the reviewer role in this workspace."


def test_the_403_page_names_the_role_from_the_roles_table(member_client):
    from memory.identity.roles import role_lines

    workspace = WorkspaceFactory()
    client = member_client(workspace=workspace, role="reviewer")
    response = client.get("/members/")
    assert response.status_code == 403
    html = response.content.decode()
    assert "This page needs the <strong>admin</strong> role in" in html
    assert f"<code>{workspace.name}</code>; your role there is <strong>reviewer</strong>" in html
    # Every role's sentence, as the table builds it (no hand-written summary), the
    # needed one marked.
    lines = dict(role_lines())
    assert all(line in html for line in lines.values())
    assert f'<li aria-current="true"><strong>{lines["admin"]}</strong></li>' in html
    assert "viewers read, reviewers also approve" not in html


def test_a_refusal_that_is_not_about_the_role_says_only_its_reason(member_client, rf):
    from django.core.exceptions import PermissionDenied

    from reviews.session import forbidden

    request = rf.get("/")
    request.user = member_client(workspace=WorkspaceFactory(), role="admin").user
    html = forbidden(request, PermissionDenied("The last admin stays.")).content.decode()
    assert "The last admin stays." in html and "role-lines" not in html


def test_logins_are_throttled_after_five_wrong_passwords():
    workspace = WorkspaceFactory()
    user_create(workspace=workspace, username="target", role="viewer", password="right-pw-1")
    client = Client()
    for attempt in range(1, 6):
        response = client.post("/login/", {"username": "target", "password": "wrong"})
        # The form again with its error, until the fifth failure locks the pair out.
        assert response.status_code == (429 if attempt == 5 else 200)
    response = client.post("/login/", {"username": "target", "password": "right-pw-1"})
    assert response.status_code == 429
    assert b"Too many failed logins" in response.content
    assert client.get("/dashboard/").status_code == 302  # not logged in
    # Another user from the same address is not locked out by someone else's guesses.
    user_create(workspace=workspace, username="other", role="viewer", password="other-pw-1")
    assert (
        client.post("/login/", {"username": "other", "password": "other-pw-1"}).status_code == 302
    )
