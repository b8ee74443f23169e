"""What every agent-API write goes through first, in one place: incognito and secrets.

A middleware rather than per-view code, so no write endpoint can forget either
rule, and placed before :class:`agents.idempotency.IdempotencyMiddleware` so
neither answer is ever stored as a replay:

1. ``"incognito": true`` at the top of the JSON body of a write sent with an
   agent or harness token: 202 ``{"recorded": false}``. The view never runs, so
   nothing is validated, stored or audited (SPEC section 3).
2. Secrets: one walker (:func:`memory.core.secrets.scan_fields`) reads every
   string leaf of the body, keys included, in its normalised forms; any finding
   is a 422 ``credential_refused`` naming each field path (``approach[0].target``),
   never echoing the value, and the view never runs.

Reads sent as POST (``/recall/``) are not writes and pass through. A body that
is not JSON passes through too: the view answers it (400).
"""

from __future__ import annotations

import json

from django.http import JsonResponse

from agents.auth import request_token
from cairn.errors import ApplicationError, error_body
from memory.core.secrets import refuse_secrets
from memory.models import TokenScope

WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
API_PREFIX = "/api/v1/"
# POSTs that only read: a query is not stored, so neither rule applies. (An erasure
# preview may look for a leaked secret by text: that is how one gets erased.)
READ_POSTS = {"/api/v1/recall/", "/api/v1/erasures/preview/", "/api/v1/actions/check/"}
# (The action gate must answer for every command, one with a secret in it or in an
# incognito session too: it stores no secret and honours incognito itself.)
# Fields that select what to delete and are never stored (the selector value travels
# in the task message only, see memory.privacy.erasure.erasure_request).
NOT_STORED = {"/api/v1/erasures/": {"selector"}}
INCOGNITO_SCOPES = {TokenScope.AGENT, TokenScope.HARNESS}


def _json_body(request):
    if "json" not in (request.content_type or ""):
        return None
    try:
        raw = request.body
    except Exception:  # noqa: BLE001 - too large or unreadable: the view answers
        return None
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None


class WriteGuardMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if (
            request.method not in WRITE_METHODS
            or not request.path.startswith(API_PREFIX)
            or request.path in READ_POSTS
        ):
            return self.get_response(request)
        body = _json_body(request)
        if body is None:
            return self.get_response(request)
        token = request_token(request)
        if token is None:
            return self.get_response(request)  # the view answers 401
        if isinstance(body, dict) and "incognito" in body and token.scope in INCOGNITO_SCOPES:
            if not isinstance(body["incognito"], bool):
                return JsonResponse(
                    error_body(
                        "invalid",
                        "incognito must be true or false.",
                        {"incognito": ["not a boolean"]},
                    ),
                    status=400,
                )
            if body["incognito"]:
                return JsonResponse({"recorded": False}, status=202)
        try:
            if isinstance(body, dict):
                skip = NOT_STORED.get(request.path, set())
                refuse_secrets({k: v for k, v in body.items() if k not in skip})
            else:
                refuse_secrets({"body": body})
        except ApplicationError as refused:
            return JsonResponse(
                error_body(refused.code, refused.message, refused.fields),
                status=refused.status_code,
            )
        return self.get_response(request)
