"""What people add while reviewing: the contradictions queue and project labels.

``ReviewItem`` is a question a background job could not settle on its own
(today: the reconcile job's conflicting pairs where one side is sealed or
written by a person). The job opens it with ``review_item_open``; a reviewer
resolves it in the UI, which calls the lesson and knowledge services.

``ProjectLabel`` is a person's name for a project digest. Cairn never stores a
project's path or remote (SPEC section 2), so the UI shows a short digest
unless someone who knows the project has named it.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from memory.models.identity import Workspace

__all__ = [
    "ProjectLabel",
    "ReviewItem",
    "ReviewItemKind",
    "ReviewItemStatus",
    "ReviewResolution",
    "ReviewTargetType",
]


class ReviewItemKind(models.TextChoices):
    CONTRADICTION = "contradiction"


class ReviewItemStatus(models.TextChoices):
    OPEN = "open"
    RESOLVED = "resolved"


class ReviewResolution(models.TextChoices):
    KEEP_A = "keep_a", "Keep A"
    KEEP_B = "keep_b", "Keep B"
    KEEP_BOTH = "keep_both", "Keep both"
    EDIT = "edit", "Edit into one"


class ReviewTargetType(models.TextChoices):
    LESSON = "lesson"
    KNOWLEDGE = "knowledge"


class ReviewItem(models.Model):
    """Two items a job found in conflict, waiting for a person's decision."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="review_items")
    kind = models.CharField(max_length=16, choices=ReviewItemKind.choices)
    a_type = models.CharField(max_length=10, choices=ReviewTargetType.choices)
    a_id = models.BigIntegerField()
    b_type = models.CharField(max_length=10, choices=ReviewTargetType.choices)
    b_id = models.BigIntegerField()
    reason = models.CharField(max_length=500)  # why the job could not settle it; no content
    details = models.JSONField(default=dict, blank=True)  # e.g. {"similarity": 0.91}
    opened_by = models.CharField(max_length=200, default="system:reconcile")
    status = models.CharField(
        max_length=10, choices=ReviewItemStatus.choices, default=ReviewItemStatus.OPEN
    )
    resolution = models.CharField(
        max_length=10, choices=ReviewResolution.choices, blank=True, default=""
    )
    resolved_by = models.CharField(max_length=200, blank=True, default="")
    resolved_reason = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "status", "-created_at", "-id"], name="review_queue"),
            # The nav counter: open items only.
            models.Index(fields=["workspace"], name="review_open", condition=Q(status="open")),
        ]
        constraints = [
            # A job that finds the same pair twice reopens nothing: one open item per pair.
            models.UniqueConstraint(
                fields=["workspace", "kind", "a_type", "a_id", "b_type", "b_id"],
                condition=Q(status="open"),
                name="review_item_one_open_per_pair",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=ReviewItemKind.values), name="review_item_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(a_type__in=ReviewTargetType.values)
                & Q(b_type__in=ReviewTargetType.values),
                name="review_item_target_types_valid",
            ),
            models.CheckConstraint(
                condition=~(Q(a_type=models.F("b_type")) & Q(a_id=models.F("b_id"))),
                name="review_item_two_targets",
            ),
            # Resolved exactly when a resolution and a person are recorded.
            models.CheckConstraint(
                condition=(
                    Q(status="open") & Q(resolution="") & Q(resolved_by="")
                    | Q(status="resolved")
                    & Q(resolution__in=ReviewResolution.values)
                    & ~Q(resolved_by="")
                ),
                name="review_item_resolution_matches_status",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk}: {self.a_type}:{self.a_id} vs {self.b_type}:{self.b_id}"


class ProjectLabel(models.Model):
    """A name for a project digest, shown next to the short digest: a person's, or the
    last path segment of the first remote a harness sent (``updated_by`` says whose)."""

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="project_labels"
    )
    project_digest = models.CharField(max_length=64)
    label = models.CharField(max_length=80)
    updated_by = models.CharField(max_length=200)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "project_digest"], name="project_label_unique"
            ),
            models.CheckConstraint(condition=Q(label__regex=r"\S"), name="project_label_not_blank"),
        ]

    def __str__(self) -> str:
        return f"{self.project_digest[:12]} = {self.label}"
