"""Reads for the webhook pages: a workspace's webhooks and each one's delivery log."""

from __future__ import annotations

from django.db.models import Count, Prefetch, Q, QuerySet

from memory.models import DeliveryState, Webhook, WebhookAttempt, WebhookDelivery, Workspace

DELIVERIES_SHOWN = 50


def webhook_list(*, workspace: Workspace) -> QuerySet[Webhook]:
    return (
        Webhook.objects.filter(workspace=workspace)
        .annotate(
            delivery_count=Count("deliveries"),
            failed_count=Count("deliveries", filter=Q(deliveries__state=DeliveryState.FAILED)),
        )
        .order_by("id")
    )


def webhook_get(*, workspace: Workspace, pk: int) -> Webhook | None:
    return Webhook.objects.filter(workspace=workspace, pk=pk).select_related("workspace").first()


def delivery_list(*, webhook: Webhook, limit: int = DELIVERIES_SHOWN) -> list[WebhookDelivery]:
    """The newest deliveries with their attempts (two queries)."""
    return list(
        WebhookDelivery.objects.filter(webhook=webhook)
        .prefetch_related(
            Prefetch("attempt_rows", queryset=WebhookAttempt.objects.order_by("number"))
        )
        .order_by("-created_at", "-id")[:limit]
    )


def delivery_get(*, webhook: Webhook, pk: int) -> WebhookDelivery | None:
    return WebhookDelivery.objects.filter(webhook=webhook, pk=pk).select_related("webhook").first()
