"""Prepare the database for `make run`: check pgvector, migrate, first-start identity."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from cairn.health import pgvector_problem
from memory.identity.services import (
    agent_get_or_create,
    token_issue,
    user_create,
    workspace_get_or_create,
)
from memory.models import Role, TokenScope


class Command(BaseCommand):
    help = (
        "Prepare the database; `make run` calls it for you. Checks that PostgreSQL has the "
        "pgvector extension, applies migrations and, the very first time (no user exists "
        "yet), creates the workspace 'default', the user 'admin' and the agent 'my-agent' and "
        "prints their password and token once. Safe to run again: existing data is kept."
    )

    def handle(self, *args, **options):
        problem = pgvector_problem()
        if problem:
            raise CommandError(problem)
        call_command("migrate", interactive=False, verbosity=0)
        if get_user_model().objects.exists():
            self.stdout.write("cairn: database ready (existing data kept).")
            return
        workspace = workspace_get_or_create(name="default", display_name="Default workspace")
        _, password = user_create(workspace=workspace, username="admin", role=Role.ADMIN)
        agent = agent_get_or_create(workspace=workspace, name="my-agent")
        issued = token_issue(agent=agent, scope=TokenScope.AGENT)
        harness = token_issue(agent=agent, scope=TokenScope.HARNESS)
        line = "=" * 72
        self.stdout.write(
            f"\n{line}\n"
            "  Cairn first start: these credentials are shown ONCE. Keep them.\n\n"
            f"  Web UI       {settings.SITE_URL}/\n"
            "  Username     admin\n"
            f"  Password     {password}\n"
            f"  Agent token    {issued.raw}\n"
            "                 for the model's tools (MCP server, client in the model loop):\n"
            "                 remember, recall, propose; its word never moves a confidence\n"
            f"  Harness token  {harness.raw}\n"
            "                 for the process that runs the tools (cairn-check, hooks); the\n"
            "                 model never sees it: outcomes and confirmations count from it\n"
            "                 (both for agent 'my-agent' in workspace 'default')\n"
            f"{line}\n"
        )
