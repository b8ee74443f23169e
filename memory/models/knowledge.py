"""The knowledge store (SPEC section 3)."""

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

EMBEDDING_DIMENSIONS = 384
CONTENT_MAX_CHARS = 2000


class Category(models.TextChoices):
    FACT = "fact"
    PREFERENCE = "preference"
    ERROR = "error"
    SKILL = "skill"
    NOTE = "note"
    REMINDER = "reminder"
    # Privileged: writable only by people.
    SYSTEM = "system"
    PROFILE = "profile"
    PERMISSION = "permission"


PRIVILEGED_CATEGORIES = frozenset({Category.SYSTEM, Category.PROFILE, Category.PERMISSION})


class Source(models.TextChoices):
    AGENT = "agent"
    EXTRACT = "extract"
    ERROR_AUTO = "error_auto"
    USER = "user"
    CONSOLIDATION = "consolidation"
    IMPORT = "import"


class KnowledgeStatus(models.TextChoices):
    ACTIVE = "active"
    ARCHIVED = "archived"


class Knowledge(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="knowledge")
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="knowledge"
    )
    content = models.TextField()
    category = models.CharField(max_length=16, choices=Category.choices, default=Category.FACT)
    domain = models.CharField(max_length=100, blank=True, default="")
    entity = models.CharField(max_length=200, blank=True, default="")  # e.g. person:sarah_chen
    context = models.CharField(max_length=200, default="global")
    sensitive = models.BooleanField(default=False)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.AGENT)
    # Which channel reported it: the agent (the model's word), the harness, a person or the system.
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.AGENT)
    # "Strength": a tiebreaker in recall; moved only by evidence (see the ledger).
    confidence = models.FloatField(default=0.5)
    use_count = models.PositiveIntegerField(default=0)
    last_used_at = models.DateTimeField(null=True, blank=True)
    due_at = models.DateTimeField(null=True, blank=True)
    reminded_at = models.DateTimeField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # Error items are keyed by the operation that failed (a later success archives them).
    operation_key = models.CharField(max_length=200, blank=True, default="")
    pinned = models.BooleanField(default=False)
    sealed = models.BooleanField(default=False)
    status = models.CharField(
        max_length=16, choices=KnowledgeStatus.choices, default=KnowledgeStatus.ACTIVE
    )
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True, default="")
    search_vector = models.GeneratedField(
        expression=SearchVector("content", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # When it was said or seen (never in the future); ingest time unless the writer
    # says otherwise (imported history). Recall's time filters and recency read it.
    observed_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            HnswIndex(
                name="knowledge_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            GinIndex(fields=["search_vector"], name="knowledge_search_gin"),
            models.Index(
                fields=["workspace", "status", "context", "category"], name="knowledge_scope_idx"
            ),
            models.Index(fields=["workspace", "entity"], name="knowledge_entity_idx"),
            models.Index(
                fields=["workspace", "due_at"],
                name="knowledge_due_idx",
                condition=Q(due_at__isnull=False),
            ),
            models.Index(
                fields=["workspace", "operation_key"],
                name="knowledge_error_op_idx",
                condition=Q(category="error"),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(confidence__gte=0.0) & Q(confidence__lte=1.0),
                name="knowledge_confidence_range",
            ),
            models.CheckConstraint(
                condition=Q(category__in=Category.values), name="knowledge_category_valid"
            ),
            models.CheckConstraint(
                condition=Q(status__in=KnowledgeStatus.values), name="knowledge_status_valid"
            ),
            models.CheckConstraint(
                condition=LessThanOrEqual(Length("content"), CONTENT_MAX_CHARS),
                name="knowledge_content_max",
            ),
            models.CheckConstraint(
                condition=Q(content__regex=r"\S"), name="knowledge_content_not_blank"
            ),
            # One active error item per failing operation: a repeat updates it, a later
            # success archives it (memory/services/conversations.py).
            models.UniqueConstraint(
                fields=["workspace", "operation_key"],
                condition=Q(category="error", status="active", superseded_by__isnull=True)
                & ~Q(operation_key=""),
                name="knowledge_one_active_error_per_op",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.category}:{self.content[:60]}"
