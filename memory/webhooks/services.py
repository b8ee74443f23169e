"""Webhooks: an admin's configuration, and the one place events turn into deliveries.

Domains call :func:`webhook_event` from the service where the thing happens (a delta
staged, quarantined or decided, a lesson retired, an erasure done). The deliveries
are rows written in the caller's transaction; their tasks are sent once it commits,
so a rolled-back write sends nothing and a committed one is never lost to a
crashed request (the rows wait, visible in the log, and can be redelivered).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlencode, urlsplit

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.actors import Actor, actor_require_role
from memory.core.audit import audit_record
from memory.core.secrets import find_secret
from memory.core.validation import unstorable
from memory.models import (
    DeliveryState,
    Role,
    Webhook,
    WebhookDelivery,
    WebhookEvent,
    Workspace,
)
from memory.models.webhooks import URL_MAX_CHARS
from memory.webhooks.destination import destination_check, undeliverable_why
from memory.webhooks.signing import webhook_secret

logger = logging.getLogger(__name__)

DELIVER_TASK = "memory.tasks.webhook_deliver"
# What an admin can subscribe to (a test event is sent on request, to one webhook).
SUBSCRIBABLE = [e for e in WebhookEvent if e != WebhookEvent.PING]
WEBHOOKS_PER_WORKSPACE = 20


@dataclass
class WebhookIssued:
    """A webhook and its secret, which exists only in this value (shown once)."""

    webhook: Webhook
    secret: str


def _refuse(field: str, message: str) -> ApplicationError:
    return ApplicationError(message, code="invalid", fields={field: [message]}, status_code=400)


def webhook_url_clean(url) -> str:
    """http(s) with a host, at most URL_MAX_CHARS, no credentials in it, not an
    internal address (``memory.webhooks.destination``)."""
    if not isinstance(url, str) or not url.strip():
        raise _refuse("url", "Enter the URL Cairn should POST events to.")
    url = url.strip()
    if len(url) > URL_MAX_CHARS:
        raise _refuse("url", f"The URL is {len(url)} characters; at most {URL_MAX_CHARS}.")
    if unstorable(url) or any(c.isspace() for c in url):
        raise _refuse("url", "The URL must not contain spaces or control characters.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 — raises on a port that is not a number
    except ValueError:
        raise _refuse("url", "That is not a URL Cairn can POST to.") from None
    if parts.scheme not in ("http", "https"):
        raise _refuse(
            "url", f"Only http:// and https:// URLs are allowed (got {parts.scheme or 'none'}:)."
        )
    if not parts.hostname:
        raise _refuse("url", "The URL needs a host, e.g. https://hooks.example.com/cairn.")
    finding = find_secret(url)
    if finding is not None or parts.username or parts.password:
        raise _refuse(
            "url",
            f"The URL looks like it carries a {finding.kind if finding else 'password'}: "
            "Cairn never stores secrets. Receivers check the X-Cairn-Signature header instead.",
        )
    why = undeliverable_why(url)
    if why:
        raise _refuse("url", f"Cairn could never deliver to that URL: {why}.")
    # Refused now when its address is already known to be internal; checked again at
    # every delivery, where an unresolvable name fails.
    destination_check(parts.hostname, url_port(parts), unresolved_ok=True)
    return url


def url_port(parts: SplitResult) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


def webhook_events_clean(events) -> list[str]:
    if not isinstance(events, list | tuple) or not events:
        raise _refuse("events", "Choose at least one event.")
    allowed = {str(e) for e in SUBSCRIBABLE}
    unknown = sorted({str(e) for e in events} - allowed)
    if unknown:
        raise _refuse("events", f"Unknown event {unknown[0]!r}; choose from {sorted(allowed)}.")
    return [str(e) for e in SUBSCRIBABLE if str(e) in set(events)]


def _admin(actor: Actor, workspace: Workspace, action: str) -> None:
    actor_require_role(actor, workspace=workspace, roles=(Role.ADMIN,), action=action)


def _audit(webhook: Webhook, actor: Actor, action: str, reason: str = "", **details) -> None:
    audit_record(
        workspace=webhook.workspace,
        actor=actor.label,
        action=action,
        target_type="webhook",
        target_id=webhook.pk,
        reason=reason,
        details=details,
    )


@transaction.atomic
def webhook_create(
    *, workspace: Workspace, url, events, actor: Actor, enabled: bool = True
) -> WebhookIssued:
    _admin(actor, workspace, "add webhooks")
    url = webhook_url_clean(url)
    events = webhook_events_clean(events)
    if Webhook.objects.filter(workspace=workspace).count() >= WEBHOOKS_PER_WORKSPACE:
        raise _refuse("url", f"A workspace has at most {WEBHOOKS_PER_WORKSPACE} webhooks.")
    webhook = Webhook.objects.create(workspace=workspace, url=url, events=events, enabled=enabled)
    _audit(webhook, actor, "webhook.create", host=urlsplit(url).hostname, events=events)
    return WebhookIssued(webhook, webhook_secret(webhook_id=webhook.pk, salt=webhook.salt))


def _locked(webhook: Webhook) -> Webhook:
    return Webhook.objects.select_for_update().select_related("workspace").get(pk=webhook.pk)


@transaction.atomic
def webhook_update(*, webhook: Webhook, actor: Actor, events=None, enabled=None) -> Webhook:
    """Change the events a webhook gets, or turn it on or off."""
    _admin(actor, webhook.workspace, "change webhooks")
    webhook = _locked(webhook)
    changed = {}
    if events is not None:
        webhook.events = changed["events"] = webhook_events_clean(events)
    if enabled is not None and bool(enabled) != webhook.enabled:
        webhook.enabled = changed["enabled"] = bool(enabled)
    if changed:
        webhook.save(update_fields=["events", "enabled"])
        action = (
            "webhook.update"
            if "events" in changed
            else "webhook." + ("enable" if webhook.enabled else "disable")
        )
        _audit(webhook, actor, action, **changed)
    return webhook


@transaction.atomic
def webhook_secret_rotate(*, webhook: Webhook, actor: Actor, reason: str = "") -> WebhookIssued:
    """A new salt, so a new secret: the old one stops verifying at once."""
    _admin(actor, webhook.workspace, "rotate webhook secrets")
    webhook = _locked(webhook)
    webhook.salt = uuid.uuid4().hex
    webhook.rotated_at = timezone.now()
    webhook.save(update_fields=["salt", "rotated_at"])
    _audit(webhook, actor, "webhook.rotate_secret", reason=reason)
    return WebhookIssued(webhook, webhook_secret(webhook_id=webhook.pk, salt=webhook.salt))


@transaction.atomic
def webhook_delete(*, webhook: Webhook, actor: Actor, reason: str = "") -> None:
    """The webhook and its delivery log go; the audit log keeps that it existed."""
    _admin(actor, webhook.workspace, "delete webhooks")
    webhook = _locked(webhook)
    _audit(webhook, actor, "webhook.delete", reason=reason, host=urlsplit(webhook.url).hostname)
    webhook.delete()


# --------------------------------------------------------------------------- events


def absolute_url(name: str, *args, workspace: Workspace) -> str:
    """A link a receiver can open: SITE_URL plus the review page's path, naming the
    workspace (``?ws=<name>``) so it opens there for someone in several."""
    path = reverse(name, args=args)
    return f"{settings.SITE_URL.rstrip('/')}{path}?{urlencode({'ws': workspace.name})}"


def _send(delivery_ids: list[int], *, number: int = 1) -> None:
    """After commit: one task per delivery (attempt ``number``, starting a round). A
    broker that refuses marks the delivery failed, which the log shows and an admin
    can redeliver; the write that caused it stays committed."""
    for pk in delivery_ids:
        try:
            current_app.send_task(DELIVER_TASK, args=[pk, number, number])
        except Exception as exc:  # the write itself committed; never undo it here
            logger.warning("webhook delivery %s not queued: %s", pk, exc)
            WebhookDelivery.objects.filter(pk=pk).update(
                state=DeliveryState.FAILED, finished_at=timezone.now()
            )


def _delivery(webhook: Webhook, *, event: str, data: dict, event_id: str) -> WebhookDelivery:
    body = {
        "event": event,
        "event_id": event_id,
        "occurred_at": timezone.now().isoformat(),
        "workspace": {"id": webhook.workspace_id, "name": webhook.workspace.name},
        "data": data,
    }
    return WebhookDelivery.objects.create(
        webhook=webhook, event=event, body=json.dumps(body, separators=(",", ":"))
    )


def webhook_event(*, workspace: Workspace, event: str, data: Callable[[], dict]) -> int:
    """Queue ``event`` for every enabled webhook of ``workspace`` that wants it.

    ``data()`` gives ids, kinds, states and absolute links only, never text an agent
    or person wrote; it is called only when some webhook wants the event, so a
    workspace without webhooks pays one query. Returns how many deliveries were queued.
    """
    webhooks = [
        w
        for w in Webhook.objects.filter(workspace=workspace, enabled=True).select_related(
            "workspace"
        )
        if event in w.events
    ]
    if not webhooks:
        return 0
    event_id, body = str(uuid.uuid4()), data()
    ids = [_delivery(w, event=event, data=body, event_id=event_id).pk for w in webhooks]
    transaction.on_commit(lambda: _send(ids))
    return len(ids)


@transaction.atomic
def webhook_test_send(*, webhook: Webhook, actor: Actor) -> WebhookDelivery:
    """A ``ping`` to this webhook only, enabled or not: does the receiver answer?"""
    _admin(actor, webhook.workspace, "send test events")
    delivery = _delivery(
        webhook,
        event=WebhookEvent.PING,
        data={"webhook": {"id": webhook.pk}, "sent_by": actor.label},
        event_id=str(uuid.uuid4()),
    )
    _audit(webhook, actor, "webhook.test")
    transaction.on_commit(lambda: _send([delivery.pk]))
    return delivery


@transaction.atomic
def delivery_redeliver(*, delivery: WebhookDelivery, actor: Actor) -> WebhookDelivery:
    """Send a failed delivery again (the same body and delivery id), with fresh retries."""
    _admin(actor, delivery.webhook.workspace, "redeliver webhook events")
    delivery = WebhookDelivery.objects.select_for_update().get(pk=delivery.pk)
    if delivery.state != DeliveryState.FAILED:
        raise ApplicationError(
            f"Delivery {delivery.pk} is {delivery.state}; only a failed delivery is redelivered.",
            code="invalid_transition",
            fields={"state": [delivery.state]},
        )
    attempt = delivery.attempts + 1
    delivery.state = DeliveryState.PENDING
    delivery.finished_at = None
    delivery.next_retry_at = None
    delivery.save(update_fields=["state", "finished_at", "next_retry_at"])
    audit_record(
        workspace=delivery.webhook.workspace,
        actor=actor.label,
        action="webhook.redeliver",
        target_type="webhook",
        target_id=delivery.webhook_id,
        details={"delivery": str(delivery.delivery_id), "event": delivery.event},
    )
    transaction.on_commit(lambda: _send([delivery.pk], number=attempt))
    return delivery
