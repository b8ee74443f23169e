"""Review links name their workspace (?ws=<name>): switching, login and 404s."""

import pytest

from memory.identity.services import user_create
from reviews.access import SESSION_KEY
from tests.factories.identity import WorkspaceFactory
from tests.factories.skills import learning_agent, propose

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests-only"


@pytest.fixture
def two(workspace):
    other = WorkspaceFactory(name="team-b")
    user, _ = user_create(workspace=workspace, username="ada", role="reviewer", password=PASSWORD)
    user_create(workspace=other, username="ada", role="viewer")
    return workspace, other, user


def _delta(workspace):
    return propose(learning_agent(workspace, name="gaia/chat"), "Escalate after 48 hours.")


def test_a_link_to_another_workspace_of_mine_switches_with_a_banner(client, two):
    home, other, user = two
    delta = _delta(other)
    client.force_login(user)
    session = client.session
    session[SESSION_KEY] = home.pk
    session.save()
    assert client.get(f"/deltas/{delta.pk}/").status_code == 404  # without ws: the current one
    response = client.get(f"/deltas/{delta.pk}/?ws=team-b")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-testid="workspace-switched"' in html
    assert "<b>team-b</b>" in html and f"you were in <b>{home.name}</b>" in html
    assert client.session[SESSION_KEY] == other.pk
    # Now current: the next page shows no banner, and links on it name team-b.
    html = client.get("/deltas/staged/").content.decode()
    assert 'data-testid="workspace-switched"' not in html
    assert f'href="/deltas/{delta.pk}/?ws=team-b"' in html


def test_an_htmx_request_is_served_in_the_named_workspace_without_switching(client, two):
    home, other, user = two
    delta = _delta(other)
    client.force_login(user)
    session = client.session
    session[SESSION_KEY] = home.pk
    session.save()
    response = client.get(f"/deltas/{delta.pk}/?ws=team-b", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert client.session[SESSION_KEY] == home.pk


def test_a_link_to_a_workspace_i_do_not_belong_to_is_a_404(client, two):
    _, _, user = two
    stranger = WorkspaceFactory(name="secret")
    delta = _delta(stranger)
    client.force_login(user)
    assert client.get(f"/deltas/{delta.pk}/?ws=secret").status_code == 404
    assert client.get(f"/deltas/{delta.pk}/?ws=no-such-workspace").status_code == 404
    assert client.get("/dashboard/?ws=secret").status_code == 404


def test_login_returns_to_the_link_in_its_workspace(client, two):
    _, other, _ = two
    delta = _delta(other)
    target = f"/deltas/{delta.pk}/?ws=team-b"
    response = client.get(target)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next=/deltas/{delta.pk}/%3Fws%3Dteam-b"
    response = client.post(
        "/login/?next=" + target.replace("?", "%3F").replace("=", "%3D"),
        {"username": "ada", "password": PASSWORD, "next": target},
    )
    assert response.status_code == 302 and response["Location"] == target
    page = client.get(target)
    assert page.status_code == 200 and "Escalate after 48 hours." in page.content.decode()
    assert client.session[SESSION_KEY] == other.pk
