"""Who acts in the demo: agents calling the API in-process (exactly as over HTTP),
and the reviewer person who approves what they propose."""

from __future__ import annotations

import json

from django.core.management.base import CommandError
from django.test import Client

from memory.identity.services import user_create
from memory.models import Role, Workspace


class DemoClient:
    """An agent talking to the API in-process, exactly as over HTTP."""

    def __init__(self, raw_token: str):
        self.client = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {raw_token}")

    def call(self, method: str, path: str, body=None, expect=(200, 201, 202)):
        response = getattr(self.client, method)(
            f"/api/v1/{path}",
            data=json.dumps(body) if body is not None else None,
            content_type="application/json",
        )
        if response.status_code not in expect:
            raise CommandError(
                f"demo: {method.upper()} /api/v1/{path} answered {response.status_code}: "
                f"{response.content[:500]!r}"
            )
        return response.json() if response.content else {}


def demo_reviewer(workspace: Workspace):
    """The demo's reviewer person, who approves what the demo agents propose."""
    user, _ = user_create(workspace=workspace, username="demo-reviewer", role=Role.REVIEWER)
    return user
