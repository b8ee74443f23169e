"""Webhook secrets and signatures (pure: no database).

The secret is never stored. It is derived from the server's ``SECRET_KEY`` and the
webhook's id and random salt, so Cairn can sign every delivery and an admin sees
the secret only when it is made or rotated (a new salt). Changing ``SECRET_KEY``
changes every webhook secret: rotate each one and give the receivers the new one.

A delivery is signed like Stripe's: ``X-Cairn-Signature: t=<unix seconds>,v1=<hex>``
where ``<hex>`` is HMAC-SHA256(secret, ``f"{t}.{raw body}"``). The timestamp is part
of what is signed, so a receiver can refuse replays older than a few minutes.
"""

from __future__ import annotations

import hashlib
import hmac
import time

from django.conf import settings

SIGNATURE_HEADER = "X-Cairn-Signature"
EVENT_HEADER = "X-Cairn-Event"
DELIVERY_HEADER = "X-Cairn-Delivery"
SECRET_PREFIX = "whsec_"


def webhook_secret(*, webhook_id: int, salt: str) -> str:
    digest = hmac.new(
        settings.SECRET_KEY.encode(), f"cairn-webhook:{webhook_id}:{salt}".encode(), hashlib.sha256
    ).hexdigest()
    return SECRET_PREFIX + digest


def signature_header(*, secret: str, body: bytes, timestamp: int | None = None) -> str:
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def signature_verify(*, secret: str, body: bytes, header: str, tolerance_s: int = 300) -> bool:
    """What a receiver does (docs/guides/webhooks.md shows the same in a few lines)."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        t = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - t) > tolerance_s:
        return False
    expected = signature_header(secret=secret, body=body, timestamp=t).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))
