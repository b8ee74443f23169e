"""Situation factories and the harness side of the recovery protocol, for tests."""

from __future__ import annotations

from datetime import timedelta

import factory
from django.utils import timezone

from memory.models import SituationLesson
from memory.situations.lessons import signature_digest
from tests.factories.identity import AgentFactory

MACHINE = "m-3f9a1c"
GH_ENV = "/usr/bin/gh 2.62.0"
GH_PROBE = {"tool": "check_cli_setup", "args": {"binary": "gh"}}


def gh_logged_out(**overrides) -> dict:
    """What check_cli_setup declares when gh is installed but not signed in."""
    return {
        "kind": "auth",
        "subject": "gh",
        "unblock": "gh auth login",
        "interactive": True,
        "probe": GH_PROBE,
        "detail": "gh is installed but not signed in.",
        "env": GH_ENV,
        **overrides,
    }


def gh_missing(**overrides) -> dict:
    return {
        "kind": "not_installed",
        "subject": "gh",
        "unblock": "brew install gh",
        "probe": GH_PROBE,
        "detail": "gh is not on PATH.",
        **overrides,
    }


def post_result(client, turn_id: str, **body):
    body.setdefault("machine", MACHINE)
    return client.post(f"/api/v1/turns/{turn_id}/results/", body, format="json")


def result_ok(client, turn_id: str, **body) -> dict:
    response = post_result(client, turn_id, **body)
    assert response.status_code == 200, response.json()
    return response.json()


class SituationLessonFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SituationLesson

    agent = factory.SubFactory(AgentFactory)
    workspace = factory.LazyAttribute(lambda o: o.agent.workspace)
    machine_digest = MACHINE
    context = factory.LazyAttribute(lambda o: f"machine:{o.machine_digest}")
    tool = "check_cli_setup"
    subject = "gh"
    kind = "auth"
    env = GH_ENV
    signature = factory.LazyAttribute(
        lambda o: signature_digest(tool=o.tool, subject=o.subject, kind=o.kind, env=o.env)
    )
    content = "gh: gh is installed but not signed in. Unblock: gh auth login"
    detail = "gh is installed but not signed in."
    unblock = "gh auth login"
    probe = factory.LazyFunction(lambda: dict(GH_PROBE))
    interactive = True
    detected_at = factory.LazyFunction(timezone.now)
    expires_at = factory.LazyFunction(lambda: timezone.now() + timedelta(days=7))
