"""`manage.py create_user WORKSPACE USERNAME ROLE [--create-workspace] [--reset-password]`."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from cairn.errors import ApplicationError
from memory.identity.services import membership_get, user_create
from memory.management.commands._workspace import workspace_for


class Command(BaseCommand):
    help = (
        "Give a person access to a workspace with ROLE: create USERNAME with a new password "
        "(printed on the last line), or, if USERNAME exists, give them ROLE in WORKSPACE and "
        "leave their password alone unless --reset-password is given. Roles: viewer reads, "
        "reviewer also approves learned changes, admin also manages members, exports, imports "
        "and erasure. WORKSPACE must exist unless --create-workspace is given."
    )

    def add_arguments(self, parser):
        parser.add_argument("workspace", help="the workspace's short name, e.g. default")
        parser.add_argument("username", help="the login name")
        parser.add_argument(
            "role", choices=["viewer", "reviewer", "admin"], help="what they may do"
        )
        parser.add_argument(
            "--create-workspace",
            action="store_true",
            help="create WORKSPACE if it does not exist (otherwise a mistyped name is refused)",
        )
        parser.add_argument(
            "--reset-password",
            action="store_true",
            help="if USERNAME exists, set and print a new password (this logs them out)",
        )

    def handle(self, *args, workspace, username, role, create_workspace, reset_password, **options):
        existing = get_user_model().objects.filter(username=username).first()
        # An existing person keeps their password unless asked: a hint run as written
        # must never lock someone out of their browser session.
        password = secrets.token_urlsafe(12) if existing is None or reset_password else None
        try:
            with transaction.atomic():
                ws, created = workspace_for(workspace, create=create_workspace)
                before = membership_get(user=existing, workspace_id=ws.pk) if existing else None
                user, password = user_create(
                    workspace=ws, username=username, role=role, password=password
                )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if created:
            self.stderr.write(f"Created workspace {ws.name!r}.")
        if existing is None:
            self.stderr.write(f"Created user {user.username!r}, {role} in {ws.name!r}. Password:")
            self.stdout.write(password)
            return
        if before is None:
            self.stderr.write(f"User {user.username!r} exists; added as {role} in {ws.name!r}.")
        elif before.role == role:
            self.stderr.write(f"User {user.username!r} is already {role} in {ws.name!r}.")
        else:
            self.stderr.write(
                f"User {user.username!r} is now {role} in {ws.name!r} (was {before.role})."
            )
        if reset_password:
            self.stderr.write("Their password was reset; the new one:")
            self.stdout.write(password)
        else:
            self.stderr.write(
                "Their password is unchanged (add --reset-password to set a new one)."
            )
