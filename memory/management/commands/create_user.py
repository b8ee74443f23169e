"""`manage.py create_user WORKSPACE USERNAME ROLE [--create-workspace]`: a person with a role."""

import secrets

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from cairn.errors import ApplicationError
from memory.identity.services import user_create
from memory.management.commands._workspace import workspace_for


class Command(BaseCommand):
    help = (
        "Give a person access to a workspace: create USERNAME (or, if it exists, set a new "
        "password) with ROLE in WORKSPACE, and print the new password on the last line. "
        "Roles: viewer reads, reviewer also approves learned changes, admin also manages "
        "exports, imports and erasure. WORKSPACE must exist unless --create-workspace is given."
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

    def handle(self, *args, workspace, username, role, create_workspace, **options):
        try:
            with transaction.atomic():
                ws, created = workspace_for(workspace, create=create_workspace)
                user, password = user_create(
                    workspace=ws, username=username, role=role, password=secrets.token_urlsafe(12)
                )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if created:
            self.stderr.write(f"Created workspace {ws.name!r}.")
        self.stderr.write(f"User {user.username!r} is {role} in {ws.name!r}. Password:")
        self.stdout.write(password)
