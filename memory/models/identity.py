"""Tenancy and identity (SPEC section 2): workspaces, members, agents, tokens."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Workspace(models.Model):
    """The tenant boundary: every other row belongs to exactly one workspace."""

    name = models.SlugField(max_length=64, unique=True)
    display_name = models.CharField(max_length=200, blank=True)
    is_demo = models.BooleanField(default=False)
    # Workspace settings named as in the spec (e.g. auto_approve_user_instruction).
    settings = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    REVIEWER = "reviewer", "Reviewer"
    ADMIN = "admin", "Admin"


ROLE_RANK = {Role.VIEWER: 0, Role.REVIEWER: 1, Role.ADMIN: 2}


class Membership(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "workspace"], name="membership_unique"),
            models.CheckConstraint(condition=Q(role__in=Role.values), name="membership_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"

    def allows(self, role: str) -> bool:
        return ROLE_RANK[Role(self.role)] >= ROLE_RANK[Role(role)]


class Agent(models.Model):
    """A named client in a workspace (e.g. ``gaia/chat``)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=128)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["workspace_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="agent_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.workspace.name}:{self.name}"

    # DRF treats request.user as the authenticated principal.
    @property
    def is_authenticated(self) -> bool:
        return True


class TokenScope(models.TextChoices):
    """One scope per channel of trust (SPEC section 2)."""

    AGENT = "agent", "Agent (the model's tools)"
    HARNESS = "harness", "Harness (runs the tools, sees exit codes)"
    ADMIN = "admin", "Admin"


class Channel(models.TextChoices):
    """Who reported a record. Only the harness and people move confidence or
    activate anything; the agent channel is the model's own word."""

    AGENT = "agent", "the agent's own word"
    HARNESS = "harness", "harness-verified"
    PERSON = "person", "a person"
    SYSTEM = "system", "the system"


class ApiToken(models.Model):
    """A bearer token. Only its sha256 is stored; the token is shown once."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tokens")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, db_index=True)
    digest = models.CharField(max_length=64, unique=True)
    scope = models.CharField(max_length=8, choices=TokenScope.choices, default=TokenScope.AGENT)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(scope__in=TokenScope.values), name="token_scope_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.agent}, {self.scope})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
