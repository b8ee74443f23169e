"""`manage.py create_user WORKSPACE USERNAME ROLE`: a person with a role."""

from django.core.management.base import BaseCommand, CommandError

from cairn.errors import ApplicationError
from memory.identity.services import user_create, workspace_get_or_create


class Command(BaseCommand):
    help = (
        "Create USERNAME (or set a new password) with ROLE in WORKSPACE; prints the password last."
    )

    def add_arguments(self, parser):
        parser.add_argument("workspace")
        parser.add_argument("username")
        parser.add_argument("role", choices=["viewer", "reviewer", "admin"])

    def handle(self, *args, workspace, username, role, **options):
        import secrets

        try:
            ws = workspace_get_or_create(name=workspace)
            user, password = user_create(
                workspace=ws, username=username, role=role, password=secrets.token_urlsafe(12)
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        self.stderr.write(f"User {user.username!r} is {role} in {ws.name!r}. Password:")
        self.stdout.write(password)
