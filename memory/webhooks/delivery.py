"""One delivery attempt: sign, POST, record, and schedule the next try.

The only module that makes a network call for webhooks. Runs in a Celery task
(``memory.tasks.webhook_deliver``), safe to run twice: an attempt is claimed with
a conditional update on the delivery's attempt count, so a redelivered message
for an attempt already made does nothing.
"""

from __future__ import annotations

import time
from datetime import timedelta

import httpx
from celery import current_app
from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone

from memory.models import DeliveryState, WebhookAttempt, WebhookDelivery, WebhookEvent
from memory.webhooks.services import DELIVER_TASK
from memory.webhooks.signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    signature_header,
    webhook_secret,
)

USER_AGENT = "Cairn-Webhook/1"
ERROR_MAX_CHARS = 300


def _post(url: str, *, body: bytes, headers: dict) -> tuple[int | None, str]:
    """``(status code or None, our words about what went wrong or "")``."""
    timeout = settings.CAIRN_WEBHOOK_TIMEOUT_S
    try:
        response = httpx.post(
            url, content=body, headers=headers, timeout=timeout, follow_redirects=False
        )
    except httpx.TimeoutException:
        return None, f"No answer within {timeout:g} s (timed out)."
    except httpx.ConnectError as exc:
        return None, f"Could not connect: {exc}"[:ERROR_MAX_CHARS]
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS]
    if 200 <= response.status_code < 300:
        return response.status_code, ""
    if 300 <= response.status_code < 400:
        return response.status_code, f"HTTP {response.status_code}: redirects are not followed."
    return response.status_code, f"HTTP {response.status_code} from the receiver."


def _claimed_but_unrecorded(delivery_id: int, number: int) -> bool:
    return (
        WebhookDelivery.objects.filter(
            pk=delivery_id, state=DeliveryState.PENDING, attempts=number
        ).exists()
        and not WebhookAttempt.objects.filter(delivery_id=delivery_id, number=number).exists()
    )


def delivery_attempt(*, delivery_id: int, number: int, first: int = 1) -> str:
    """Make attempt ``number`` of a delivery whose current round began at ``first``.

    1. Claim the attempt (pending, ``attempts == number - 1``); otherwise do nothing,
       unless a worker died after claiming it and before recording it (acks-late
       redelivers the message): then it is made now.
    2. A disabled webhook gets nothing more (a test event still goes).
    3. Sign with the derived secret and a fresh timestamp; POST with a short timeout.
    4. 2xx: delivered. Otherwise wait the next step of CAIRN_WEBHOOK_RETRY_S and
       queue the next attempt, or, after the last, mark the delivery failed.
    Returns the delivery's state after this attempt ("" when nothing was done).
    """
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, state=DeliveryState.PENDING, attempts=number - 1
    ).update(attempts=number, next_retry_at=None)
    if not claimed and not _claimed_but_unrecorded(delivery_id, number):
        return ""
    delivery = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)
    webhook = delivery.webhook
    started = timezone.now()
    if not webhook.enabled and delivery.event != WebhookEvent.PING:
        status, error, elapsed = None, "Not sent: the webhook is disabled.", 0.0
    else:
        body = delivery.body.encode()
        secret = webhook_secret(webhook_id=webhook.pk, salt=webhook.salt)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            EVENT_HEADER: delivery.event,
            DELIVERY_HEADER: str(delivery.delivery_id),
            SIGNATURE_HEADER: signature_header(secret=secret, body=body),
        }
        clock = time.monotonic()
        status, error = _post(webhook.url, body=body, headers=headers)
        elapsed = time.monotonic() - clock
    try:
        WebhookAttempt.objects.create(
            delivery=delivery,
            number=number,
            started_at=started,
            status_code=status,
            duration_ms=int(elapsed * 1000),
            error=error[:ERROR_MAX_CHARS],
        )
    except IntegrityError:  # another run of the same message recorded it first
        return ""
    retries = settings.CAIRN_WEBHOOK_RETRY_S
    step = number - first
    now = timezone.now()
    if not error:
        state, next_at, finished = DeliveryState.DELIVERED, None, now
    elif step < len(retries) and webhook.enabled:
        state, next_at, finished = (
            DeliveryState.PENDING,
            now + timedelta(seconds=retries[step]),
            None,
        )
    else:
        state, next_at, finished = DeliveryState.FAILED, None, now
    WebhookDelivery.objects.filter(pk=delivery_id).update(
        state=state, last_status_code=status, next_retry_at=next_at, finished_at=finished
    )
    if next_at is not None:
        current_app.send_task(
            DELIVER_TASK, args=[delivery_id, number + 1, first], countdown=retries[step]
        )
    return state
