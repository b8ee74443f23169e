"""`manage.py create_agent WORKSPACE AGENT`: an agent and a token (printed once)."""

from django.core.management.base import BaseCommand, CommandError

from cairn.errors import ApplicationError
from memory.identity.services import agent_get_or_create, token_issue, workspace_get_or_create
from memory.models import TokenScope


class Command(BaseCommand):
    help = "Create WORKSPACE and AGENT if missing and print a new API token (last line)."

    def add_arguments(self, parser):
        parser.add_argument("workspace")
        parser.add_argument("agent")
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument(
            "--harness",
            action="store_true",
            help="issue a harness-scoped token: for the process that runs the tools and sees "
            "real exit codes (outcomes, turns, tool calls and feedback count only from it). "
            "Never give it to the model.",
        )
        scope.add_argument(
            "--admin",
            action="store_true",
            help="issue an admin-scoped token (exports, erasures, jobs)",
        )

    def handle(self, *args, workspace, agent, admin, harness, **options):
        try:
            ws = workspace_get_or_create(name=workspace)
            agent_obj = agent_get_or_create(workspace=ws, name=agent)
            issued = token_issue(
                agent=agent_obj,
                scope=TokenScope.ADMIN
                if admin
                else TokenScope.HARNESS
                if harness
                else TokenScope.AGENT,
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        self.stderr.write(
            f"Token for agent {agent_obj.name!r} in workspace {ws.name!r} "
            f"(scope {issued.token.scope}); it is shown once:"
        )
        self.stdout.write(issued.raw)
