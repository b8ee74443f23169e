"""Erasure receipts (SPEC principle 4): what an erasure deleted, without content.

A receipt outlives the rows it describes: it is kept for the audit retention
period even if its job run is pruned earlier, and it never holds the erased
content. A text-match selector is stored as its sha256 and length only.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from memory.models.identity import Workspace

__all__ = ["ErasureReceipt", "ErasureSelector", "ErasureStatus"]


class ErasureStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # its worker died and the job could not be resumed


class ErasureReceipt(models.Model):
    # SET_NULL: the receipt is the proof an erasure happened; it stays if the
    # workspace itself is removed later (its name is copied below).
    workspace = models.ForeignKey(
        Workspace, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    workspace_name = models.CharField(max_length=64)
    job_run = models.OneToOneField(
        "memory.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="receipt"
    )
    status = models.CharField(
        max_length=16, choices=ErasureStatus.choices, default=ErasureStatus.QUEUED
    )
    requested_by = models.CharField(max_length=200)
    reason = models.CharField(max_length=500, blank=True)
    # {"kind": "text", "sha256": "...", "length": 12} — never the value of a content selector.
    selector = models.JSONField()
    # What the preview said would go, and what was deleted: {table: rows}.
    preview = models.JSONField(default=dict, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    # Side effects outside tables: cache keys, export files, vacuumed tables.
    effects = models.JSONField(default=dict, blank=True)
    # Rows still matching after the verification passes (0 unless writes kept matching).
    remaining = models.JSONField(default=dict, blank=True)
    requested_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # sha256 of the canonical receipt body, filled when the erasure completes.
    digest = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]
        indexes = [models.Index(fields=["workspace", "-requested_at"], name="receipt_ws_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ErasureStatus.values), name="receipt_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"erasure receipt {self.pk} ({self.workspace_name}, {self.status})"

    @property
    def rows_deleted(self) -> int:
        return sum(self.counts.values())


class ErasureSelector(models.Model):
    """The selector's value while its erasure job is pending or running.

    Kept here, not in the broker message: a message sits in Valkey's append-only
    file long after the job (and in the broker for the visibility timeout when a
    worker dies). The job deletes this row when it ends (and VACUUMs the table);
    a resumed job reads it again.
    """

    job_run = models.OneToOneField(
        "memory.JobRun", on_delete=models.CASCADE, related_name="erasure_selector"
    )
    kind = models.CharField(max_length=16)
    value = models.TextField()

    def __str__(self) -> str:
        return f"erasure selector of run {self.job_run_id}"
