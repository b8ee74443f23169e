"""Workspace webhooks: where Cairn tells a team's tools that something needs a person.

No signing secret is stored: each webhook keeps a random salt, and its secret is
derived from the server's SECRET_KEY and that salt (``memory.webhooks.signing``),
shown once when it is made or rotated. Deliveries carry ids, kinds and links,
never what an agent or person wrote.
"""

from __future__ import annotations

import secrets
import uuid

from django.db import models
from django.db.models import Q

from memory.models.identity import Workspace

__all__ = [
    "DeliveryState",
    "Webhook",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookEvent",
]

URL_MAX_CHARS = 500


def _salt() -> str:
    return secrets.token_hex(16)


class WebhookEvent(models.TextChoices):
    DELTA_STAGED = "delta.staged", "Delta staged"
    DELTA_QUARANTINED = "delta.quarantined", "Delta quarantined"
    DELTA_DECIDED = "delta.decided", "Delta decided (approved or rejected)"
    LESSON_RETIRED = "lesson.retired", "Lesson retired"
    ERASURE_COMPLETED = "erasure.completed", "Erasure done"
    PING = "ping", "Test event"


class Webhook(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=URL_MAX_CHARS)
    # Event names (WebhookEvent values, never "ping": a test event goes to this webhook only).
    events = models.JSONField(default=list)
    enabled = models.BooleanField(default=True)
    # The secret is HMAC(SECRET_KEY, "cairn-webhook:<id>:<salt>"); rotating draws a new salt.
    salt = models.CharField(max_length=64, default=_salt)
    created_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["workspace_id", "id"]

    def __str__(self) -> str:
        return f"webhook {self.pk} → {self.url}"


class DeliveryState(models.TextChoices):
    PENDING = "pending", "Pending"  # queued, or waiting for its next retry
    DELIVERED = "delivered", "Delivered"  # a 2xx answer
    FAILED = "failed", "Failed"  # every attempt failed (redeliver starts again)


class WebhookDelivery(models.Model):
    """One event sent to one webhook; its attempts are ``WebhookAttempt`` rows."""

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    # Sent as X-Cairn-Delivery: the receiver's idempotency key (the same on every retry).
    delivery_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    event = models.CharField(max_length=32, choices=WebhookEvent.choices)
    # The exact JSON sent (ids, kinds and links only); retries send it unchanged.
    body = models.TextField()
    state = models.CharField(
        max_length=16, choices=DeliveryState.choices, default=DeliveryState.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    next_retry_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["webhook", "-created_at"], name="webhook_delivery_recent")]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=DeliveryState.values), name="webhook_delivery_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} delivery {self.delivery_id} ({self.state})"


class WebhookAttempt(models.Model):
    """One HTTP request of a delivery: what came back, how long it took."""

    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_rows"
    )
    number = models.PositiveSmallIntegerField()
    started_at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    # Our own words about the failure (timeout, refused, HTTP 500), never the receiver's body.
    error = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["delivery_id", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["delivery", "number"], name="webhook_attempt_unique_number"
            ),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of delivery {self.delivery_id}"
