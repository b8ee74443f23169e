"""Workspace settings: admins turn goal texts on or off (audited); others may not."""

import pytest

from memory.identity.services import GOAL_TEXT_SETTING
from memory.models import AuditEvent, Membership, Workspace
from tests.factories.review import OutcomeFactory
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db


def test_it_shows_the_switch_off_by_default(member_client, workspace):
    admin = member_client(workspace=workspace, role="admin")
    html = admin.get("/workspace/settings/").content.decode()
    assert 'name="store_goal_text"' in html and "checked" not in html
    assert 'href="/workspace/settings/"' in without_ws(html)  # in the nav for admins


def test_an_admin_turns_it_on_and_off_audited(member_client, workspace):
    admin = member_client(workspace=workspace, role="admin")
    response = admin.post("/workspace/settings/save/", {"store_goal_text": "on"})
    assert response.status_code == 303
    assert Workspace.objects.get(pk=workspace.pk).settings[GOAL_TEXT_SETTING] is True
    assert "checked" in admin.get("/workspace/settings/").content.decode()
    admin.post("/workspace/settings/save/", {})
    assert Workspace.objects.get(pk=workspace.pk).settings[GOAL_TEXT_SETTING] is False
    events = AuditEvent.objects.filter(action="workspace.setting").order_by("id")
    assert [e.details["value"] for e in events] == [True, False]
    assert all(e.actor.startswith("user:admin") for e in events)


def test_saving_the_same_value_writes_no_audit_event(member_client, workspace):
    admin = member_client(workspace=workspace, role="admin")
    admin.post("/workspace/settings/save/", {})
    assert not AuditEvent.objects.filter(action="workspace.setting").exists()


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_only_admins_see_or_change_it(member_client, workspace, role):
    person = member_client(workspace=workspace, role=role)
    assert person.get("/workspace/settings/").status_code == 403
    assert person.post("/workspace/settings/save/", {"store_goal_text": "on"}).status_code == 403
    assert GOAL_TEXT_SETTING not in Workspace.objects.get(pk=workspace.pk).settings
    assert 'href="/workspace/settings/"' not in person.get("/outcomes/").content.decode()


def test_the_outcome_page_shows_the_goal_text_when_stored(member_client, workspace):
    viewer = member_client(workspace=workspace, role="viewer")
    outcome = OutcomeFactory(
        workspace=workspace, goal_digest="a" * 64, goal_text="Ship the <b>cart</b> fix"
    )
    html = viewer.get(f"/outcomes/{outcome.pk}/").content.decode()
    assert "Ship the &lt;b&gt;cart&lt;/b&gt; fix" in html
    assert "aaaaaaaaaaaa" not in html


def test_the_outcome_page_shows_the_digest_otherwise(member_client, workspace):
    viewer = member_client(workspace=workspace, role="viewer")
    outcome = OutcomeFactory(workspace=workspace, goal_digest="b" * 64)
    html = viewer.get(f"/outcomes/{outcome.pk}/").content.decode()
    assert "bbbbbbbbbbbb" in html and "(digest only" in html


def test_an_admin_turns_auto_approval_of_user_instructions_on_audited(member_client, workspace):
    from memory.identity.services import workspace_setting
    from tests.factories.skills import learning_agent, propose

    admin = member_client(workspace=workspace, role="admin")
    html = admin.get("/workspace/settings/").content.decode()
    assert 'data-testid="auto-approve"' in html and 'data-testid="auto-approve" checked' not in html
    response = admin.post(
        "/workspace/settings/save/",
        {"setting": "auto_approve_user_instruction", "auto_approve_user_instruction": "on"},
        follow=True,
    )
    assert "approved at once from now on" in response.content.decode()
    workspace.refresh_from_db()
    assert workspace_setting(workspace=workspace, name="auto_approve_user_instruction")
    # A person's cited instruction now becomes active without a reviewer.
    delta = propose(learning_agent(workspace, name="gaia/chat"), "Escalate after 48 hours.")
    delta.refresh_from_db()
    assert delta.status == "active"
    # The goal-text switch is left as it was.
    assert not workspace_setting(workspace=workspace, name="store_goal_text")


def test_an_admin_creates_a_workspace_and_lands_on_its_first_hour(member_client, workspace):
    admin = member_client(workspace=workspace, role="admin")
    response = admin.post("/workspace/new/", {"name": "team-b", "display_name": "Team B"})
    assert response.status_code == 302 and response["Location"] == "/dashboard/?ws=team-b"
    created = Workspace.objects.get(name="team-b")
    assert Membership.objects.get(user=admin.user, workspace=created).role == "admin"
    assert AuditEvent.objects.filter(workspace=created, action="workspace.create").exists()
    html = admin.get(response["Location"]).content.decode()
    assert 'data-testid="first-hour"' in html and "Connect your agent" in html
    assert html.index('data-testid="first-hour"') < html.index('id="needs-you"')


@pytest.mark.parametrize("name", ["", "Team B", "-x", "a" * 65, "team_b", "tëam"])
def test_a_bad_workspace_name_is_refused_naming_the_field(member_client, workspace, name):
    admin = member_client(workspace=workspace, role="admin")
    before = Workspace.objects.count()
    response = admin.post("/workspace/new/", {"name": name})
    assert response.status_code == 422
    assert "Workspace name must be" in response.content.decode()
    assert Workspace.objects.count() == before


def test_a_taken_name_and_a_reviewer_are_refused(member_client, workspace):
    admin = member_client(workspace=workspace, role="admin")
    response = admin.post("/workspace/new/", {"name": workspace.name})
    assert response.status_code == 422 and "exists already" in response.content.decode()
    reviewer = member_client(workspace=workspace, role="reviewer")
    assert reviewer.post("/workspace/new/", {"name": "mine"}).status_code == 403
