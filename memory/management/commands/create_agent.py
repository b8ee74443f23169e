"""`manage.py create_agent WORKSPACE AGENT [--harness|--admin] [--create-workspace]`: an agent and a
token (printed once)."""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from cairn.errors import ApplicationError
from memory.identity.services import agent_get_or_create, token_issue
from memory.management.commands._workspace import workspace_for
from memory.models import Agent, TokenScope


class Command(BaseCommand):
    help = (
        "Issue an API token for an agent (a program that calls the Cairn API, e.g. "
        "gaia/chat): creates AGENT in WORKSPACE if it is new and prints a new token on the "
        "last line, shown only this once. Older tokens of the agent keep working. WORKSPACE "
        "must exist unless --create-workspace is given."
    )

    def add_arguments(self, parser):
        parser.add_argument("workspace", help="the workspace's short name, e.g. default")
        parser.add_argument("agent", help="the agent's name, e.g. gaia/chat")
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
            help="issue an admin-scoped token (may also call the admin API: export, erasure, jobs)",
        )
        parser.add_argument(
            "--create-workspace",
            action="store_true",
            help="create WORKSPACE if it does not exist (otherwise a mistyped name is refused)",
        )

    def handle(self, *args, workspace, agent, admin, harness, create_workspace, **options):
        scope = TokenScope.ADMIN if admin else TokenScope.HARNESS if harness else TokenScope.AGENT
        try:
            with transaction.atomic():
                ws, created = workspace_for(workspace, create=create_workspace)
                existed = Agent.objects.filter(workspace=ws, name=agent.strip()).exists()
                agent_obj = agent_get_or_create(workspace=ws, name=agent)
                issued = token_issue(agent=agent_obj, scope=scope)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if created:
            self.stderr.write(f"Created workspace {ws.name!r}.")
        self.stderr.write(
            f"{'Existing' if existed else 'New'} agent {agent_obj.name!r} in workspace "
            f"{ws.name!r}: a new token (scope {issued.token.scope}), shown once:"
        )
        self.stdout.write(issued.raw)
