"""A request budget for the endpoints that scan tool output (SPEC section 10).

``POST /api/v1/situations/classify/`` and ``POST /api/v1/turns/{id}/results/`` take
up to a megabyte of tool output and scan it; an agent token may call both. So each
token has a budget, counted in Valkey per fixed minute:

- ``CAIRN_SCAN_RATE_PER_MIN`` requests and ``CAIRN_SCAN_BYTES_PER_MIN`` body bytes;
  over either, 429 ``rate_limited`` with ``Retry-After`` (seconds to the next window:
  budgets are counted per 10 s, a sixth of the per-minute figure each);
- a body over ``CAIRN_SCAN_BODY_MAX_BYTES`` is a 413 ``too_large`` before it is read.

The middleware runs first, before any body is parsed or scanned. A request with no
valid token passes through (the view answers 401). When Valkey is down the budget
is not enforced (the request is served; a warning is logged) rather than failing
every agent's loop on a counter.
"""

from __future__ import annotations

import logging
import math
import re
import time

from django.conf import settings
from django.core.cache import cache
from django.http import JsonResponse

from agents.auth import request_token
from agents.body_caps import body_cap
from cairn.errors import error_body
from cairn.guard import refuse_body

logger = logging.getLogger(__name__)

SCANNING_PATHS = re.compile(r"^/api/v1/(?:situations/classify|turns/[^/]{1,200}/results)/$")
# The per-minute budgets are counted in windows of a sixth of a minute, so eight
# tokens starting together cannot spend a whole minute's budget in one burst.
WINDOW_S = 10
WINDOWS_PER_MIN = 60 // WINDOW_S


def _content_length(request) -> int:
    try:
        return max(int(request.META.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return 0


def budget_charge(*, key: str, amount: int, limit: int, now: float) -> float | None:
    """Add ``amount`` to ``key``'s count for this window; seconds to wait when the
    count is over ``limit`` (per window), else None. One round trip to Valkey when the
    window's counter exists, two when it starts it."""
    start = int(now // WINDOW_S) * WINDOW_S
    counter = f"budget:{key}:{start}"
    try:
        used = cache.incr(counter, amount)
    except ValueError:  # the window's first request
        if cache.add(counter, amount, timeout=WINDOW_S + 5):
            used = amount
        else:
            used = cache.incr(counter, amount)
    if used > limit:
        return start + WINDOW_S - now
    return None


def too_large(request, limit: int) -> JsonResponse:
    refuse_body(request)
    return JsonResponse(
        error_body(
            "too_large",
            f"The request body is larger than {limit} bytes. Send the head and tail of a large "
            "tool output: the classifier reads only "
            f"{settings.CAIRN_SCAN_HEAD_CHARS} + {settings.CAIRN_SCAN_TAIL_CHARS} characters of "
            "each field.",
            {"body": [f"larger than {limit} bytes"]},
        ),
        status=413,
    )


API_PREFIX = "/api/v1/"
WRITES = frozenset({"POST", "PUT", "PATCH"})


def body_too_large(request, cap: int) -> JsonResponse:
    """413 for a body over its operation's cap (``agents.body_caps``), before it is read."""
    refuse_body(request)
    return JsonResponse(
        error_body(
            "too_large",
            f"The request body is larger than {cap} bytes, the most this operation's "
            "fields can hold.",
            {"body": [f"larger than {cap} bytes"]},
        ),
        status=413,
    )


class RequestBudgetMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method in WRITES and request.path.startswith(API_PREFIX):
            cap = body_cap(request)
            if cap is not None and _content_length(request) > cap:
                return body_too_large(request, cap)
        if request.method != "POST" or not SCANNING_PATHS.match(request.path):
            return self.get_response(request)
        length = _content_length(request)
        limit = settings.CAIRN_SCAN_BODY_MAX_BYTES
        if length > limit:
            return too_large(request, limit)
        token = request_token(request)
        if token is None:
            return self.get_response(request)
        now = time.time()
        try:
            wait = budget_charge(
                key=f"scan-requests:{token.digest[:16]}",
                amount=1,
                limit=max(settings.CAIRN_SCAN_RATE_PER_MIN // WINDOWS_PER_MIN, 1),
                now=now,
            ) or budget_charge(
                key=f"scan-bytes:{token.digest[:16]}",
                amount=length,
                limit=max(settings.CAIRN_SCAN_BYTES_PER_MIN // WINDOWS_PER_MIN, 1),
                now=now,
            )
        except Exception:  # noqa: BLE001 - a counter outage must not stop the agents
            logger.warning("request budget not enforced: the cache is unavailable", exc_info=True)
            return self.get_response(request)
        if wait is None:
            return self.get_response(request)
        retry_after = max(math.ceil(wait), 1)
        response = JsonResponse(
            error_body(
                "rate_limited",
                f"This token has used its budget for scanning tool output for now "
                f"({settings.CAIRN_SCAN_RATE_PER_MIN} requests or "
                f"{settings.CAIRN_SCAN_BYTES_PER_MIN} bytes); retry in {retry_after} s.",
                {"token": ["over the per-minute budget"]},
            ),
            status=429,
        )
        response["Retry-After"] = str(retry_after)
        return response
