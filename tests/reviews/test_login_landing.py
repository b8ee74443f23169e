"""After login a person lands where there is something to review (issue 16, item 7)."""

import pytest
from django.contrib.auth import get_user_model

from memory.identity.services import user_create
from memory.review.landing import workspace_landing
from reviews.access import SESSION_KEY
from tests.factories.identity import WorkspaceFactory
from tests.factories.lessons import LessonFactory
from tests.factories.review import OutcomeFactory
from tests.factories.skills import bulk_deltas, learning_agent

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


def person(*workspaces):
    user = None
    for workspace in workspaces:
        user, _ = user_create(
            workspace=workspace, username="alice", role="reviewer", password=PASSWORD
        )
    return user


def login(client):
    response = client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302, response.content
    return client.session.get(SESSION_KEY)


@pytest.fixture
def default():
    return WorkspaceFactory(name="default", display_name="Default workspace")


@pytest.fixture
def demo():
    return WorkspaceFactory(name="demo", display_name="Demo", is_demo=True)


def test_an_empty_default_sends_a_demo_member_to_the_demo(client, default, demo):
    person(default, demo)
    bulk_deltas(learning_agent(demo), 3)
    assert login(client) == demo.pk
    page = client.get("/dashboard/", follow=True).content.decode()
    assert "selected>Demo</option>" in page


def test_a_default_with_content_stays_the_landing(client, default, demo):
    person(default, demo)
    OutcomeFactory(workspace=default)
    bulk_deltas(learning_agent(demo), 3)
    assert login(client) == default.pk


def test_it_picks_the_workspace_with_the_most_to_review(client, default, demo):
    busy = WorkspaceFactory(name="team")
    person(default, demo, busy)
    bulk_deltas(learning_agent(demo), 1)
    bulk_deltas(learning_agent(busy), 4)
    assert login(client) == busy.pk


def test_ties_go_to_the_demo(demo):
    default = WorkspaceFactory(name="a-default")
    team = WorkspaceFactory(name="b-team")  # before "demo" by name
    user = person(default, team, demo)
    LessonFactory(workspace=team)
    LessonFactory(workspace=demo)
    assert workspace_landing(user=user) == demo


def test_an_empty_default_and_empty_others_keep_the_default(client, default, demo):
    person(default, demo)
    assert login(client) == default.pk


def test_a_single_membership_lands_there(client, default):
    person(default)
    assert login(client) == default.pk


def test_no_membership_lands_nowhere():
    user = get_user_model().objects.create_user(username="bob", password=PASSWORD)
    assert workspace_landing(user=user) is None


def test_a_failed_login_sets_nothing(client, default, demo):
    person(default, demo)
    response = client.post("/login/", {"username": "alice", "password": "wrong"})
    assert response.status_code == 200 and SESSION_KEY not in client.session


def test_the_login_page_hint_for_a_lost_password_says_it_resets_it(client):
    html = client.get("/login/").content.decode()
    assert "create_user default admin admin --reset-password" in html
