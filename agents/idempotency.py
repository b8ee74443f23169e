"""Idempotency-Key on every agent write endpoint, in one place.

A middleware rather than per-view code, so each write endpoint gets the same
behaviour: a retried request with the same key replays the stored response
(header ``Idempotent-Replayed: true``) and applies nothing twice.
"""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse

from agents.auth import request_token
from cairn.errors import error_body
from memory.core.idempotency import (
    KEY_MAX_CHARS,
    idempotency_guard,
    idempotency_lookup,
    idempotency_store,
    request_digest,
)

WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
HEADER = "HTTP_IDEMPOTENCY_KEY"


class IdempotencyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        key = request.META.get(HEADER)
        if (
            key is None
            or request.method not in WRITE_METHODS
            or not request.path.startswith("/api/v1/")
        ):
            return self.get_response(request)
        if not key or len(key) > KEY_MAX_CHARS or not key.isprintable():
            return JsonResponse(
                error_body(
                    "invalid_idempotency_key",
                    f"Idempotency-Key must be 1-{KEY_MAX_CHARS} printable characters.",
                    {"Idempotency-Key": ["invalid"]},
                ),
                status=400,
            )
        token = request_token(request)
        if token is None:
            return self.get_response(request)  # the view answers 401
        body = request.body  # read once here; Django caches it for the view
        digest = request_digest(method=request.method, path=request.get_full_path(), body=body)
        scope = token.scope
        with idempotency_guard(agent=token.agent, scope=scope, key=key):
            stored = idempotency_lookup(agent=token.agent, scope=scope, key=key, digest=digest)
            if stored is not None:
                if not stored.matches:
                    return JsonResponse(
                        error_body(
                            "idempotency_key_reused",
                            "This Idempotency-Key was already used for a different request; "
                            "use a new key for a new request.",
                            {"Idempotency-Key": ["reused"]},
                        ),
                        status=422,
                    )
                replay = HttpResponse(
                    stored.body, status=stored.status_code, content_type=stored.content_type
                )
                replay["Idempotent-Replayed"] = "true"
                return replay
            response = self.get_response(request)
            # Only successes are kept: a failed request may be retried with the same key.
            if 200 <= response.status_code < 300 and not response.streaming:
                idempotency_store(
                    agent=token.agent,
                    scope=scope,
                    key=key,
                    method=request.method,
                    path=request.get_full_path(),
                    digest=digest,
                    status_code=response.status_code,
                    body=response.content,
                    content_type=response.get("Content-Type", "application/json"),
                )
            return response
