"""Operational records: job runs and the audit log (SPEC principle 8, section 7)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from memory.models.identity import Workspace


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped"  # another run held the lock
    INTERRUPTED = "interrupted", "Interrupted"  # its worker died; the reaper says so


class JobRun(models.Model):
    """One run of a background job: start, end, counts, errors, progress."""

    Status = JobStatus

    kind = models.CharField(max_length=64, db_index=True)
    workspace = models.ForeignKey(
        Workspace, null=True, blank=True, on_delete=models.CASCADE, related_name="job_runs"
    )
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    params = models.JSONField(default=dict, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    result = models.JSONField(default=dict, blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    requested_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "kind", "-created_at"]),
            models.Index(fields=["workspace", "-created_at"], name="jobrun_ws_recent"),
            # The nav badge and the job list's status filter look for live runs only.
            models.Index(
                fields=["status"],
                name="jobrun_live",
                condition=Q(status__in=["queued", "running"]),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=JobStatus.values), name="jobrun_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} ({self.status})"

    @property
    def progress(self) -> float:
        if self.status == self.Status.SUCCEEDED:
            return 1.0
        if not self.progress_total:
            return 0.0
        return min(1.0, self.progress_done / self.progress_total)


class AuditEvent(models.Model):
    """Who changed what, and why. Holds no content of the items it names."""

    workspace = models.ForeignKey(
        Workspace, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    actor = models.CharField(max_length=200)  # "user:alice", "agent:gaia/chat", "system:decay"
    action = models.CharField(max_length=64, db_index=True)
    target_type = models.CharField(max_length=64, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    reason = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workspace", "-created_at"]),
            # One item's story (a lesson's page, the audit log's target filter).
            models.Index(fields=["workspace", "target_type", "target_id"], name="audit_target"),
        ]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.target_type}:{self.target_id}"


class IdempotencyRecord(models.Model):
    """A write request's response, replayed when the same Idempotency-Key comes again."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey("memory.Agent", on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    # The token scope that used the key: keys are per scope, so an agent token cannot
    # take the key its harness will send and have the harness's write replay its own.
    scope = models.CharField(max_length=16, default="agent")
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=500)
    request_digest = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    response_body = models.BinaryField()
    content_type = models.CharField(max_length=100, default="application/json")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "scope", "key"], name="idempotency_unique_scope_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.method} {self.path} [{self.key}]"
