"""The action gate's records (SPEC section 4a): each check that asked or denied, the
person's answer to it, and what "always for this project" approved."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from memory.models.identity import Agent, Workspace

__all__ = ["ActionApproval", "ActionCheck", "ActionAnswer", "ActionDecision"]


class ActionDecision(models.TextChoices):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class ActionAnswer(models.TextChoices):
    ALLOW_ONCE = "allow_once", "Allow this once"
    ALWAYS = "always", "Always for this project"
    DENY = "deny", "Deny"


class ActionCheck(models.Model):
    """A gate answer that was not ``allow`` (allows are not stored: one write per asked
    command, none per ordinary one)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL)
    session_id = models.CharField(max_length=200, blank=True, default="")
    project_digest = models.CharField(max_length=64, blank=True, default="")
    command = models.TextField()
    decision = models.CharField(max_length=8, choices=ActionDecision.choices)
    reasons = models.JSONField(default=list)
    reach = models.JSONField(default=list)
    answer = models.CharField(max_length=12, choices=ActionAnswer.choices, blank=True, default="")
    answered_by = models.CharField(max_length=200, blank=True, default="")
    answered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "session_id"], name="action_check_session_idx")
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(decision__in=ActionDecision.values), name="action_check_decision_valid"
            ),
            models.CheckConstraint(
                condition=Q(answer="") | Q(answer__in=ActionAnswer.values),
                name="action_check_answer_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.decision}: {self.command[:60]}"


class ActionApproval(models.Model):
    """A reach part a person approved for a project ("always for this project"): the gate
    no longer asks about it there."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    project_digest = models.CharField(max_length=64)
    kind = models.CharField(max_length=16)
    key = models.CharField(max_length=300)
    action_check = models.ForeignKey(
        ActionCheck, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "project_digest", "kind", "key"],
                name="action_approval_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.key}"
