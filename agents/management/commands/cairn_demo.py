"""Seed a clearly labelled demo workspace by replaying scripted agent sessions
through the real agent API (URL routing, token auth, serializers, services).

Runs once: if the demo workspace exists, it does nothing. `make run` calls it
on start unless CAIRN_DEMO=0.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from agents.demo.actors import DemoClient
from agents.demo.coder import (
    knowledge_sessions,
    lesson_sessions,
    maintenance_sessions,
    situation_sessions,
)
from agents.demo.mail import skill_sessions
from memory.identity.services import (
    GOAL_TEXT_SETTING,
    agent_get_or_create,
    token_issue,
    workspace_get_or_create,
)
from memory.models import Membership, Role, TokenScope, Workspace

DEMO_WORKSPACE = "demo"


class Command(BaseCommand):
    help = "Load the demo workspace (once) by replaying scripted agent sessions through the API."

    def handle(self, *args, **options):
        if Workspace.objects.filter(name=DEMO_WORKSPACE).exists():
            self.stdout.write("cairn: demo workspace already loaded.")
            return
        with transaction.atomic():
            # Sample data: the demo keeps the goal texts its harness sends, so its
            # outcome pages show what each turn was for (off by default elsewhere).
            workspace = workspace_get_or_create(
                name=DEMO_WORKSPACE,
                display_name="Demo workspace (sample data)",
                is_demo=True,
                settings={GOAL_TEXT_SETTING: True},
            )
            # Every existing admin may look around the demo.
            for user in get_user_model().objects.filter(memberships__role=Role.ADMIN).distinct():
                Membership.objects.get_or_create(
                    user=user, workspace=workspace, defaults={"role": Role.ADMIN}
                )
            mail = DemoClient(
                token_issue(agent=agent_get_or_create(workspace=workspace, name="gaia/mail")).raw
            )
            coder_agent = agent_get_or_create(workspace=workspace, name="gaia/coder")
            coder = DemoClient(token_issue(agent=coder_agent).raw)
            # The harness runs the coder's tools and sees real exit codes: outcomes,
            # turns and tool calls come through its own token, never the model's.
            coder_harness = DemoClient(token_issue(agent=coder_agent, scope=TokenScope.HARNESS).raw)
            steps = [
                ("knowledge", lambda: knowledge_sessions(coder, coder_harness)),
                ("lessons", lambda: lesson_sessions(coder_harness)),
                ("situations", lambda: situation_sessions(coder_harness)),
                ("skills", lambda: skill_sessions(mail, workspace)),
                ("maintenance", lambda: maintenance_sessions(coder, workspace, stdout=self.stdout)),
            ]
            for name, step in steps:
                step()
                self.stdout.write(f"cairn: demo {name} loaded.")
        self.stdout.write(
            "cairn: demo workspace 'demo' is ready (switch to it in the UI's workspace menu)."
        )
