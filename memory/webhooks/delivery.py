"""One delivery attempt: sign, POST, record, and schedule the next try.

The only module that makes a network call for webhooks. Runs in a Celery task
(``memory.tasks.webhook_deliver``), safe to run twice: an attempt is claimed with
a conditional update on the delivery's attempt count, so a redelivered message
for an attempt already made does nothing.
"""

from __future__ import annotations

import time
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

import httpx
from celery import current_app
from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.models import DeliveryState, WebhookAttempt, WebhookDelivery, WebhookEvent
from memory.webhooks.destination import destination_check, undeliverable_why
from memory.webhooks.services import DELIVER_TASK, url_port
from memory.webhooks.signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    signature_header,
    webhook_secret,
)

USER_AGENT = "Cairn-Webhook/1"
ERROR_MAX_CHARS = 300
# What the delivery log says of a failure, whatever happened: a refused connection,
# a timeout, a 404 and a 500 look the same, so the log cannot map the network.
NOT_DELIVERED = "Not delivered: the receiver did not accept it."
DISABLED = "Not sent: the webhook is disabled."


def _pinned(url: str) -> tuple[str, dict, dict] | None:
    """``url`` rewritten to the address just checked, with the Host header and TLS
    name of the original; None when its host is refused or does not resolve."""
    if undeliverable_why(url):
        return None
    parts = urlsplit(url)
    try:
        checked = destination_check(parts.hostname or "", url_port(parts), unresolved_ok=False)
    except ApplicationError:
        return None
    if not checked.addresses:
        return None
    address = checked.addresses[0]
    literal = f"[{address}]" if address.version == 6 else str(address)
    netloc = f"{literal}:{url_port(parts)}"
    headers = {"Host": parts.netloc.rpartition("@")[2]}
    extensions = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
    return urlunsplit(parts._replace(netloc=netloc)), headers, extensions


def _post(url: str, *, body: bytes, headers: dict) -> bool:
    """Whether the receiver accepted ``body`` (a 2xx). The destination is checked
    again here and the connection goes to the checked address (no DNS rebinding),
    never through a proxy, never following a redirect."""
    pinned = _pinned(url)
    if pinned is None:
        return False
    target, host, extensions = pinned
    try:
        with httpx.Client(
            timeout=settings.CAIRN_WEBHOOK_TIMEOUT_S, follow_redirects=False, trust_env=False
        ) as client:
            response = client.post(
                target, content=body, headers={**headers, **host}, extensions=extensions
            )
    except httpx.HTTPError:
        return False
    return 200 <= response.status_code < 300


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
    3. Sign with the derived secret and a fresh timestamp; check the destination
       again and POST to the checked address with a short timeout.
    4. 2xx: delivered. Otherwise (refused destination, no connection, timeout, any
       other answer: the log does not say which) wait the next step of CAIRN_WEBHOOK_RETRY_S and
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
    clock = time.monotonic()
    if not webhook.enabled and delivery.event != WebhookEvent.PING:
        error = DISABLED
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
        error = "" if _post(webhook.url, body=body, headers=headers) else NOT_DELIVERED
    elapsed = time.monotonic() - clock
    try:
        # No status code and no duration: delivered or not is all the log says.
        WebhookAttempt.objects.create(
            delivery=delivery,
            number=number,
            started_at=started,
            status_code=None,
            duration_ms=0,
            error=error,
        )
    except IntegrityError:  # another run of the same message recorded it first
        return ""
    retries = settings.CAIRN_WEBHOOK_RETRY_S
    step = number - first
    # Times count from the attempt's start, so when the next one starts (or when the
    # delivery finished) does not tell how long the network took to answer.
    now = started
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
        state=state, last_status_code=None, next_retry_at=next_at, finished_at=finished
    )
    if next_at is not None:
        current_app.send_task(
            DELIVER_TASK,
            args=[delivery_id, number + 1, first],
            countdown=max(0.0, retries[step] - elapsed),
        )
    return state
