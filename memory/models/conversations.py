"""Conversation turns and tool calls, stored per session (SPEC section 3).

Raw history: searchable by full text, pruned after the retention period, and
the source the consolidate job distils into knowledge. Nothing is stored for
incognito sessions.
"""

from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Length
from django.db.models.lookups import LessThanOrEqual
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

from memory.models.identity import Agent, Channel, Workspace
from memory.models.knowledge import EMBEDDING_DIMENSIONS

__all__ = ["ConversationTurn", "ToolCall", "TurnRole", "TURN_CONTENT_MAX_CHARS"]

TURN_CONTENT_MAX_CHARS = 20000


class TurnRole(models.TextChoices):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class ConversationTurn(models.Model):
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="conversation_turns"
    )
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="conversation_turns"
    )
    session_id = models.CharField(max_length=200)
    role = models.CharField(max_length=16, choices=TurnRole.choices)
    turn_index = models.PositiveIntegerField()
    content = models.TextField()
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.AGENT)
    context = models.CharField(max_length=200, default="global")
    search_vector = models.GeneratedField(
        expression=SearchVector("content", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    # The turn in context (speaker, date, the turn before; memory/knowledge/turn_text.py),
    # embedded at store time; null when the embedder failed (the backfill job fills it).
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # Set by the consolidate job once the turn has been distilled into knowledge.
    consolidated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["session_id", "turn_index", "id"]
        indexes = [
            models.Index(fields=["workspace", "session_id", "turn_index"], name="turn_session_idx"),
            GinIndex(fields=["search_vector"], name="turn_search_gin"),
            HnswIndex(
                name="turn_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]
        constraints = [
            # A retried POST of the same turn finds this row instead of adding another.
            models.UniqueConstraint(
                fields=["workspace", "agent", "session_id", "turn_index", "role"],
                name="turn_unique_per_session",
            ),
            models.CheckConstraint(condition=Q(role__in=TurnRole.values), name="turn_role_valid"),
            models.CheckConstraint(
                condition=LessThanOrEqual(Length("content"), TURN_CONTENT_MAX_CHARS),
                name="turn_content_max",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.turn_index} {self.role}"


class ToolCall(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="tool_calls")
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="tool_calls"
    )
    session_id = models.CharField(max_length=200)
    tool = models.CharField(max_length=100)
    operation_key = models.CharField(max_length=200)
    ok = models.BooleanField()
    error = models.TextField(blank=True, default="")
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    at = models.DateTimeField(default=timezone.now)
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.AGENT)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "tool", "-at"], name="toolcall_tool_idx"),
            models.Index(fields=["workspace", "operation_key", "-at"], name="toolcall_op_idx"),
            models.Index(fields=["workspace", "-at"], name="toolcall_at_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.tool} {self.operation_key} {'ok' if self.ok else 'failed'}"
