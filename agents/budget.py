"""Per-token request budgets and body caps: charged first, before any body is read.

Every write of the agent API (``POST``, ``PUT``, ``PATCH``, ``DELETE`` on a route of
the ``agents`` namespace) goes through :func:`request_charge`, the one place a
request is charged, called by :class:`RequestBudgetMiddleware`, the first middleware
(SPEC section 10; issue 56: "a budget for every endpoint, charged before the work").
Which budgets an operation spends is :func:`budgets_for`:

- ``writes``: every write (``CAIRN_WRITE_RATE_PER_MIN`` requests and
  ``CAIRN_WRITE_BYTES_PER_MIN`` declared body bytes per token);
- ``scan``: the two endpoints that scan tool output, ``POST /situations/classify/``
  and ``POST /turns/{id}/results/``, spend it as well (``CAIRN_SCAN_RATE_PER_MIN``,
  ``CAIRN_SCAN_BYTES_PER_MIN``), and their body is capped at
  ``CAIRN_SCAN_BODY_MAX_BYTES``;
- ``recall``: ``POST /recall/`` is a read sent as POST; it spends its own budget
  (``CAIRN_RECALL_RATE_PER_MIN``), not the writes'.

Budgets are counted in Valkey per token (never per workspace, so one token's spending
leaves every other token alone), in fixed windows of ``WINDOW_S`` seconds, a sixth of
the per-minute figure each: eight tokens starting together cannot spend a minute's
budget in one burst. Over a budget: 429 ``rate_limited`` naming the budget, with
``Retry-After`` (seconds to the next window). Then, still before the body is read, a
body over its operation's cap (:mod:`agents.body_caps`) is 413 ``too_large``.

Rates do not bound how many requests a workspace holds at once: eight tokens each
sending one slow write at a time hold all of a default server's eight threads, and
another workspace's ``/recall/`` waits behind them. So a charged request also takes
one of its workspace's ``CAIRN_WORKSPACE_CONCURRENT_REQUESTS`` slots (Valkey keys
that expire after ``SLOT_TTL_S``, past the longest a worker may run, so a killed
worker's slot comes back) and gives it back when answered; with none free, 429
naming the workspace's concurrency, ``Retry-After: 1``.

A request with no valid token is not charged (the view answers 401, before any
parsing); its body cap still applies. When Valkey is down the budget is not enforced
(the request is served; a warning is logged) rather than failing every agent's loop
on a counter.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.http import JsonResponse
from django.urls import Resolver404, resolve

from agents.auth import request_token
from agents.body_caps import cap_advice, operation_cap
from cairn.errors import error_body
from cairn.guard import refuse_body

#: A 429's body is read and discarded (so the client reads the answer and keeps its
#: connection) up to this size; a larger one closes the connection unread: a client
#: over its budget sending megabytes is not worth reading them for.
RATE_LIMITED_DRAIN_BYTES = 1024 * 1024

logger = logging.getLogger(__name__)

API_NAMESPACE = "agents"
CHARGED_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The per-minute budgets are counted in windows of a sixth of a minute.
WINDOW_S = 10
WINDOWS_PER_MIN = 60 // WINDOW_S


@dataclass(frozen=True)
class Budget:
    """One per-token budget: a request count and, optionally, declared body bytes."""

    name: str
    rate_setting: str
    bytes_setting: str | None
    what: str

    def per_window(self, setting: str) -> int:
        return max(getattr(settings, setting) // WINDOWS_PER_MIN, 1)


WRITES = Budget("writes", "CAIRN_WRITE_RATE_PER_MIN", "CAIRN_WRITE_BYTES_PER_MIN", "writes")
SCAN = Budget("scan", "CAIRN_SCAN_RATE_PER_MIN", "CAIRN_SCAN_BYTES_PER_MIN", "scanning tool output")
RECALL = Budget("recall", "CAIRN_RECALL_RATE_PER_MIN", None, "recall")

# (url name, method) of the operations that scan tool output, and of reads sent as POST.
SCANNING = frozenset({("situations-classify", "POST"), ("turn-results", "POST")})
RECALLS = frozenset({("recall", "POST")})


def budgets_for(url_name: str, method: str) -> tuple[Budget, ...]:
    """The budgets one request to this operation spends: every write spends one."""
    if method not in CHARGED_METHODS:
        return ()
    if (url_name, method) in RECALLS:
        return (RECALL,)
    if (url_name, method) in SCANNING:
        return (WRITES, SCAN)
    return (WRITES,)


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


def _over(budget: Budget, *, token_key: str, length: int, now: float):
    """``(seconds to wait, the setting whose limit was passed)``, or None."""
    spends = [("requests", budget.rate_setting, 1)]
    if budget.bytes_setting is not None and length:
        spends.append(("bytes", budget.bytes_setting, length))
    for unit, setting, amount in spends:
        wait = budget_charge(
            key=f"{budget.name}-{unit}:{token_key}",
            amount=amount,
            limit=budget.per_window(setting),
            now=now,
        )
        if wait is not None:
            return wait, setting
    return None


def rate_limited(request, budget: Budget, wait: float, setting: str) -> JsonResponse:
    refuse_body(request, drain_max=RATE_LIMITED_DRAIN_BYTES)
    retry_after = max(math.ceil(wait), 1)
    unit = "requests" if setting == budget.rate_setting else "body bytes"
    response = JsonResponse(
        error_body(
            "rate_limited",
            f"This token has used its {budget.name} budget for {budget.what} for now "
            f"({getattr(settings, setting)} {unit} a minute, {setting}); "
            f"retry in {retry_after} s.",
            {"token": [f"over the per-minute {budget.name} budget"]},
        ),
        status=429,
    )
    response["Retry-After"] = str(retry_after)
    return response


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


def body_too_large(request, cap: int, advice: str) -> JsonResponse:
    """413 for a body over its operation's cap (``agents.body_caps``), before it is read."""
    refuse_body(request)
    return JsonResponse(
        error_body(
            "too_large",
            f"The request body is larger than {cap} bytes, this operation's cap. {advice}",
            {"body": [f"larger than {cap} bytes"]},
        ),
        status=413,
    )


#: A slot outlives the longest request a worker may serve (gunicorn's timeout kills it).
SLOT_TTL_S = 40


def workspace_slot_take(*, workspace_id: int, limit: int) -> str | None:
    """Take one of the workspace's ``limit`` in-flight slots: its key, or None when all
    are held. Each slot is its own key (SET NX with an expiry): a slot a killed worker
    never gave back expires rather than blocking the workspace for good."""
    for n in range(limit):
        key = f"inflight:{workspace_id}:{n}"
        if cache.add(key, 1, timeout=SLOT_TTL_S):
            return key
    return None


def workspace_slot_give(key: str) -> None:
    try:
        cache.delete(key)
    except Exception:  # noqa: BLE001 - the slot expires by itself
        logger.warning("in-flight slot %s not released: the cache is unavailable", key)


def too_many_in_flight(request) -> JsonResponse:
    refuse_body(request, drain_max=RATE_LIMITED_DRAIN_BYTES)
    limit = settings.CAIRN_WORKSPACE_CONCURRENT_REQUESTS
    response = JsonResponse(
        error_body(
            "rate_limited",
            f"This workspace already has {limit} requests in progress "
            f"(CAIRN_WORKSPACE_CONCURRENT_REQUESTS); retry in 1 s.",
            {"workspace": ["too many requests in progress"]},
        ),
        status=429,
    )
    response["Retry-After"] = "1"
    return response


def _cap_refusal(request, url_name: str, length: int) -> JsonResponse | None:
    if (url_name, request.method) in SCANNING and length > settings.CAIRN_SCAN_BODY_MAX_BYTES:
        return too_large(request, settings.CAIRN_SCAN_BODY_MAX_BYTES)
    cap = operation_cap(url_name, request.method)
    if length > cap:
        return body_too_large(request, cap, cap_advice(url_name, request.method))
    return None


def request_charge(request) -> JsonResponse | None:
    """Charge one API request to its token's budgets and hold its body to its cap,
    before anything reads the body; the refusal (413 or 429), or None to serve it.

    1. Only writes of the agent API (``agents`` namespace) are charged; anything
       else passes.
    2. With a valid token, every budget of :func:`budgets_for` is charged one request
       and the declared ``Content-Length``, an over-size body's too (it is read to be
       refused, and a flood of refusals is still a flood).
    3. A body over its operation's cap answers 413, with or without a token, even when
       a budget is spent too: it would never be served, so "retry later" would be wrong.
       Otherwise the first budget over its limit answers 429.
    4. A request to be served takes one of its workspace's in-flight slots (given back
       by the middleware once answered); none free: 429.
    """
    if request.method not in CHARGED_METHODS or not request.path.startswith("/api/"):
        return None
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return None
    if match.namespace != API_NAMESPACE:
        return None
    length = _content_length(request)
    over = None
    token = request_token(request)
    if token is not None:
        now = time.time()
        try:
            for budget in budgets_for(match.url_name, request.method):
                spent = _over(budget, token_key=token.digest[:16], length=length, now=now)
                if spent is not None and over is None:
                    over = (budget, *spent)
        except Exception:  # noqa: BLE001 - a counter outage must not stop the agents
            logger.warning("request budget not enforced: the cache is unavailable", exc_info=True)
    refusal = _cap_refusal(request, match.url_name, length)
    if refusal is None and over is not None:
        refusal = rate_limited(request, *over)
    if refusal is None and token is not None:
        try:
            slot = workspace_slot_take(
                workspace_id=token.workspace_id,
                limit=settings.CAIRN_WORKSPACE_CONCURRENT_REQUESTS,
            )
        except Exception:  # noqa: BLE001 - a counter outage must not stop the agents
            logger.warning("in-flight limit not enforced: the cache is unavailable", exc_info=True)
        else:
            if slot is None:
                return too_many_in_flight(request)
            request._cairn_slot = slot
    return refusal


class RequestBudgetMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        refusal = request_charge(request)
        if refusal is not None:
            return refusal
        try:
            return self.get_response(request)
        finally:
            if slot := getattr(request, "_cairn_slot", None):
                workspace_slot_give(slot)
