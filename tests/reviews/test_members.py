"""The Members page: admins add, re-role and remove people; nobody else may."""

import re

import pytest
from django.contrib.auth import get_user_model

from memory.models import AuditEvent, Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(member_client, workspace):
    return member_client(workspace=workspace, role="admin")


def test_it_lists_members_as_a_full_page_with_one_h1(admin, workspace):
    html = admin.get("/members/").content.decode()
    assert html.count("<h1") == 1 and admin.user.username in html and "(you)" in html


def test_a_new_username_gets_a_password_shown_once(admin, workspace, client):
    response = admin.post("/members/add/", {"username": "newbie", "role": "reviewer"})
    html = response.content.decode()
    assert response.status_code == 200
    password = re.search(r'data-testid="one-time-password">([^<]+)<', html).group(1)
    user = get_user_model().objects.get(username="newbie")
    assert user.check_password(password)
    assert Membership.objects.get(user=user, workspace=workspace).role == "reviewer"
    assert "no-cache" in response["Cache-Control"] or "no-store" in response["Cache-Control"]
    # The answer asks the browser to show the Members page's own address, so a reload
    # is a GET, not the form again (tests/browser/test_reviewer_desk_links.py reloads).
    assert f'data-replace-url="/members/?ws={workspace.name}"' in html
    # Not shown again.
    assert password not in admin.get("/members/").content.decode()
    event = AuditEvent.objects.get(action="member.add", target_id=str(user.pk))
    assert event.actor == f"user:{admin.user.username}" and event.details["new_user"] is True


def test_an_existing_user_is_added_with_their_password_untouched(admin, workspace):
    from memory.identity.services import user_create
    from tests.factories.identity import WorkspaceFactory

    user, _ = user_create(
        workspace=WorkspaceFactory(), username="ada", role="viewer", password="ada-own"
    )
    html = admin.post("/members/add/", {"username": "ada", "role": "viewer"}).content.decode()
    assert 'data-testid="one-time-password"' not in html and "password is unchanged" in html
    user.refresh_from_db()
    assert user.check_password("ada-own")
    again = admin.post("/members/add/", {"username": "ada", "role": "admin"})
    assert again.status_code == 422 and "already a member" in again.content.decode()


def test_roles_change_and_members_go_but_never_the_last_admin(admin, workspace):
    admin.post("/members/add/", {"username": "bob", "role": "viewer"})
    bob = Membership.objects.get(user__username="bob", workspace=workspace)
    admin.post(f"/members/{bob.pk}/role/", {"role": "reviewer"})
    bob.refresh_from_db()
    assert bob.role == "reviewer"
    mine = Membership.objects.get(user=admin.user, workspace=workspace)
    response = admin.post(f"/members/{mine.pk}/role/", {"role": "viewer"}, follow=True)
    assert "only admin" in response.content.decode()
    assert Membership.objects.get(pk=mine.pk).role == "admin"
    admin.post(f"/members/{bob.pk}/remove/", {"reason": "left"})
    assert not Membership.objects.filter(pk=bob.pk).exists()
    assert get_user_model().objects.filter(username="bob").exists()  # the user stays
    assert AuditEvent.objects.get(action="member.remove").reason == "left"


def test_only_admins_see_or_change_members(member_client, workspace):
    reviewer = member_client(workspace=workspace, role="reviewer")
    assert reviewer.get("/members/").status_code == 403
    assert reviewer.post("/members/add/", {"username": "x", "role": "admin"}).status_code == 403
    assert not get_user_model().objects.filter(username="x").exists()


def test_a_member_of_another_workspace_is_not_found(admin):
    from memory.identity.services import user_create
    from tests.factories.identity import WorkspaceFactory

    user, _ = user_create(workspace=WorkspaceFactory(), username="eve", role="viewer")
    other = Membership.objects.get(user=user)
    assert admin.post(f"/members/{other.pk}/remove/").status_code == 404
    assert Membership.objects.filter(pk=other.pk).exists()


def test_promotion_to_admin_needs_a_reason_kept_in_the_audit_log(admin, workspace):
    admin.post("/members/add/", {"username": "cleo", "role": "viewer"})
    cleo = Membership.objects.get(user__username="cleo", workspace=workspace)
    response = admin.post(
        f"/members/{cleo.pk}/role/", {"role": "admin", "reason": " "}, follow=True
    )
    assert "Say why this person becomes an admin" in response.content.decode()
    assert Membership.objects.get(pk=cleo.pk).role == "viewer"
    admin.post(f"/members/{cleo.pk}/role/", {"role": "admin", "reason": "runs the exports now"})
    assert Membership.objects.get(pk=cleo.pk).role == "admin"
    event = AuditEvent.objects.get(action="member.role", target_id=str(cleo.user_id))
    assert event.reason == "runs the exports now" and event.details == {
        "from": "viewer",
        "to": "admin",
    }
    # The page asks in a form of its own: no select that submits on change.
    html = admin.get("/members/").content.decode()
    assert "data-autosubmit" not in html[html.index('id="members-title"') :]
    assert f'id="role-reason-{cleo.pk}"' in html


def test_the_role_lines_come_from_the_roles_table(admin, workspace):
    """What the page says each role may do is the table the middleware enforces: a route
    moved to another role moves its words with it (export is an admin's, SPEC §2)."""
    from memory.identity.roles import role_lines

    page = admin.get(f"/members/?ws={workspace.name}").content.decode()
    lines = dict(role_lines())
    for sentence in lines.values():
        assert sentence.replace("'", "&#x27;") in page
    assert "exports" in lines["admin"] and "exports" not in lines["reviewer"]
