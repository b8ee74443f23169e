"""Who may use a workspace, changed by its admins in the review UI (each change audited).

A workspace never loses its last admin: nobody could then add people, change roles
or run an erasure there without the command line.
"""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.db import transaction

from cairn.errors import ApplicationError, NotFoundError
from memory.core.actors import Actor, actor_require_role
from memory.core.audit import audit_record
from memory.models import Membership, Role, Workspace

USERNAME_MAX_CHARS = 150


def member_list(*, workspace: Workspace) -> list[Membership]:
    """The workspace's members, admins first, then by username."""
    order = {Role.ADMIN: 0, Role.REVIEWER: 1, Role.VIEWER: 2}
    members = list(
        Membership.objects.select_related("user")
        .filter(workspace=workspace)
        .order_by("user__username")
    )
    return sorted(members, key=lambda m: (order.get(m.role, 3), m.user.username.lower()))


def member_get(*, workspace: Workspace, pk) -> Membership | None:
    return Membership.objects.select_related("user").filter(workspace=workspace, pk=pk).first()


def _role_check(role: str) -> None:
    if role not in Role.values:
        raise ApplicationError(
            f"Unknown role {role!r}; use one of {', '.join(Role.values)}.",
            fields={"role": ["invalid"]},
        )


def _admin_only(actor: Actor, workspace: Workspace) -> None:
    actor_require_role(actor, workspace=workspace, roles=(Role.ADMIN,), action="manage members")


@transaction.atomic
def member_add(
    *, workspace: Workspace, username: str, role: str, actor: Actor
) -> tuple[Membership, str | None]:
    """Give ``username`` ``role`` in ``workspace``; returns (membership, one-time password).

    1. An existing user is added as they are: their password is never touched
       (the password is None).
    2. A new username creates the user with a random password, returned once to be
       handed over; Cairn keeps only its hash.
    3. Someone already a member is refused: their role is changed on their row.
    """
    _admin_only(actor, workspace)
    _role_check(role)
    username = (username or "").strip()
    if not username or len(username) > USERNAME_MAX_CHARS or any(c.isspace() for c in username):
        raise ApplicationError(
            "Give a username without spaces, at most 150 characters.",
            fields={"username": ["invalid"]},
        )
    User = get_user_model()
    user = User.objects.filter(username=username).first()
    password = None
    if user is None:
        password = secrets.token_urlsafe(12)
        user = User.objects.create_user(username=username, password=password)
    elif Membership.objects.filter(user=user, workspace=workspace).exists():
        raise ApplicationError(
            f"{username} is already a member; change their role in the list.",
            code="already_member",
            fields={"username": ["already a member"]},
        )
    membership = Membership.objects.create(user=user, workspace=workspace, role=role)
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action="member.add",
        target_type="user",
        target_id=user.pk,
        details={"role": role, "new_user": password is not None},
    )
    return membership, password


def _last_admin_refuse(membership: Membership) -> None:
    if membership.role != Role.ADMIN:
        return
    admins = Membership.objects.filter(workspace_id=membership.workspace_id, role=Role.ADMIN)
    if admins.count() <= 1:
        raise ApplicationError(
            f"{membership.user.username} is this workspace's only admin: make someone else "
            "admin first.",
            code="last_admin",
            fields={"role": ["last admin"]},
        )


@transaction.atomic
def member_role_set(*, membership: Membership, role: str, actor: Actor, reason: str = "") -> bool:
    """Change a member's role; returns whether it changed.

    Making someone an admin hands them members, tokens, exports and erasure: like a
    removal it needs a reason, kept in the audit log.
    """
    _admin_only(actor, membership.workspace)
    _role_check(role)
    reason = (reason or "").strip()
    if role == Role.ADMIN and membership.role != Role.ADMIN and not reason:
        raise ApplicationError(
            "Say why this person becomes an admin: the reason is kept in the audit log.",
            fields={"reason": ["required"]},
        )
    locked = Membership.objects.select_for_update().select_related("user").get(pk=membership.pk)
    if locked.role == role:
        return False
    if role != Role.ADMIN:
        _last_admin_refuse(locked)
    previous = locked.role
    locked.role = role
    locked.save(update_fields=["role"])
    membership.role = role
    audit_record(
        workspace=membership.workspace,
        actor=actor.label,
        action="member.role",
        target_type="user",
        target_id=locked.user_id,
        details={"from": previous, "to": role},
        reason=reason,
    )
    return True


@transaction.atomic
def member_remove(*, membership: Membership, actor: Actor, reason: str = "") -> None:
    """Take a member out of the workspace (their user and other workspaces stay)."""
    _admin_only(actor, membership.workspace)
    locked = (
        Membership.objects.select_for_update()
        .select_related("user")
        .filter(pk=membership.pk)
        .first()
    )
    if locked is None:
        raise NotFoundError("No such member in this workspace.")
    _last_admin_refuse(locked)
    locked.delete()
    audit_record(
        workspace=membership.workspace,
        actor=actor.label,
        action="member.remove",
        target_type="user",
        target_id=locked.user_id,
        reason=reason,
        details={"role": locked.role},
    )
