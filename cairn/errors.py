"""One application error type, mapped once to the API error shape (SPEC section 11).

{"error": {"code": "...", "message": "...", "fields": {...}}}   with a 4xx status
"""

from __future__ import annotations

import sys

from django import db
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpResponse, JsonResponse
from django.template import loader
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rest_framework import exceptions, status
from rest_framework.response import Response


class ApplicationError(Exception):
    """A rule said no. ``code`` is machine-readable; ``fields`` names the input at fault."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY

    def __init__(
        self,
        message: str,
        *,
        code: str = "invalid",
        fields: dict | None = None,
        status_code: int | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.code = code
        self.fields = fields or {}
        if status_code is not None:
            self.status_code = status_code


class NotFoundError(ApplicationError):
    status_code = status.HTTP_404_NOT_FOUND

    def __init__(self, message: str = "Not found.", **kwargs):
        kwargs.setdefault("code", "not_found")
        super().__init__(message, **kwargs)


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def _flatten(detail) -> dict:
    """DRF's nested ValidationError detail → {"field": ["message", ...]} (dotted paths)."""
    out: dict[str, list[str]] = {}

    def walk(value, path: str):
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(inner, f"{path}.{key}" if path else str(key))
        elif (
            isinstance(value, list)
            and value
            and all(isinstance(v, (str, exceptions.ErrorDetail)) for v in value)
        ):
            out.setdefault(path or "non_field_errors", []).extend(str(v) for v in value)
        elif isinstance(value, list):
            for index, inner in enumerate(value):
                if inner:
                    walk(inner, f"{path}[{index}]" if path else f"[{index}]")
        else:
            out.setdefault(path or "non_field_errors", []).append(str(value))

    walk(detail, "")
    return out


_CODES = {
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "throttled",
    exceptions.ParseError: "parse_error",
}


def api_exception_handler(exc, context):
    headers = {}
    if (part := outage_of(exc)) is not None:
        exc = ServiceUnavailable(part)
    if isinstance(exc, ApplicationError):
        if exc.status_code == status.HTTP_503_SERVICE_UNAVAILABLE:
            headers["Retry-After"] = str(RETRY_AFTER_S)
        return Response(
            error_body(exc.code, exc.message, exc.fields), status=exc.status_code, headers=headers
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        names = ", ".join(sorted(fields))
        return Response(
            error_body("invalid", f"Invalid input: {names}.", fields),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, exceptions.APIException):
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))
        code = next((c for cls, c in _CODES.items() if isinstance(exc, cls)), "error")
        return Response(error_body(code, str(exc.detail)), status=exc.status_code, headers=headers)
    return None


def json_404(request, exception=None):
    return JsonResponse(error_body("not_found", "No such path."), status=404)


def json_500(request):
    return JsonResponse(
        error_body("server_error", "Internal error; it has been logged."), status=500
    )


def wants_json(request) -> bool:
    return request.path.startswith("/api/") or request.path.startswith("/healthz")


# --- a part is down: 503 with Retry-After, never a 500 --------------------------------

RETRY_AFTER_S = 5


_OUTAGES = (
    db.OperationalError,
    db.InterfaceError,
    BrokerError,
    RedisConnectionError,
    RedisTimeoutError,
)


def outage_of(exc: BaseException | None) -> str | None:
    """ "database" or "broker" when ``exc`` (or what caused it) is a service being down."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, _OUTAGES):
            return "database" if isinstance(exc, db.Error) else "broker"
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


_OUTAGE_MESSAGES = {
    "database": "The database is not reachable; nothing was changed. Retry in a few seconds.",
    "broker": "The job queue and cache (Valkey) are not reachable; a job asked for was not "
    "started (its run is marked failed). Retry in a few seconds.",
}


class ServiceUnavailable(ApplicationError):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE

    def __init__(self, part: str, **kwargs):
        kwargs.setdefault("code", f"{part}_unavailable")
        super().__init__(_OUTAGE_MESSAGES[part], **kwargs)


def unavailable_response(request, part: str):
    exc = ServiceUnavailable(part)
    if wants_json(request):
        response = JsonResponse(error_body(exc.code, exc.message), status=503)
    else:
        # Rendered without the request: context processors would query the database.
        html = loader.get_template("503.html").render({"part": part})
        response = HttpResponse(html, status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def json_404_or_html(request, exception=None):
    if wants_json(request):
        return json_404(request, exception)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def json_400_or_html(request, exception=None):
    if wants_json(request):
        return JsonResponse(error_body("bad_request", "Bad request."), status=400)
    from django.views.defaults import bad_request

    return bad_request(request, exception)


def json_500_or_html(request):
    """Django's last resort. A database or broker outage is a 503, not a 500."""
    part = outage_of(sys.exc_info()[1])
    if part is not None:
        return unavailable_response(request, part)
    if wants_json(request):
        return json_500(request)
    from django.views.defaults import server_error

    return server_error(request)
