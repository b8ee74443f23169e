"""Workspace settings: admins turn goal texts on or off (audited); others may not."""

import pytest

from memory.identity.services import GOAL_TEXT_SETTING
from memory.models import AuditEvent, Workspace
from tests.factories.review import OutcomeFactory

pytestmark = pytest.mark.django_db


def test_it_shows_the_switch_off_by_default(member_client, workspace):
    admin = member_client(workspace=workspace, role="admin")
    html = admin.get("/workspace/settings/").content.decode()
    assert 'name="store_goal_text"' in html and "checked" not in html
    assert 'href="/workspace/settings/"' in html  # in the nav for admins


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
