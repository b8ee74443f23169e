"""One application error type, mapped once to the API error shape (SPEC section 11).

{"error": {"code": "...", "message": "...", "fields": {...}}}   with a 4xx status
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, JsonResponse
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
    if isinstance(exc, ApplicationError):
        return Response(error_body(exc.code, exc.message, exc.fields), status=exc.status_code)
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


def _wants_json(request) -> bool:
    return request.path.startswith("/api/") or request.path.startswith("/healthz")


def json_404_or_html(request, exception=None):
    if _wants_json(request):
        return json_404(request, exception)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def json_500_or_html(request):
    if _wants_json(request):
        return json_500(request)
    from django.views.defaults import server_error

    return server_error(request)
