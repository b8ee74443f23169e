"""Bearer-token authentication for agents (SPEC section 2)."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from memory.identity import roles
from memory.identity.services import token_lookup, token_touch
from memory.models import ApiToken

_UNSET = object()


def request_token(request) -> ApiToken | None:
    """The active token named by the request's ``Authorization`` header, or None.

    Looked up once per request: the write guard, the idempotency middleware and
    the DRF authentication all ask, and share the one query (``_cairn_token`` on
    the Django request; a DRF ``Request`` is unwrapped to it).
    """
    request = getattr(request, "_request", request)
    token = request.__dict__.get("_cairn_token", _UNSET)
    if token is _UNSET:
        token = token_lookup(authorization=request.META.get("HTTP_AUTHORIZATION", ""))
        request._cairn_token = token
    return token


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        if len(parts) != 2 or parts[0].lower() != self.keyword.lower():
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        token = request_token(request)
        if token is not None:
            token = token_touch(token=token)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return token.agent, token

    def authenticate_header(self, request):
        return self.keyword


class ScopeFromTable(permissions.BasePermission):
    """The API's one permission: the token's scope must be one ``API_SCOPES`` admits for
    this route (``memory/identity/roles.py``). An undeclared route admits nobody."""

    message = "This endpoint is not open to any token."

    def has_permission(self, request, view):
        if request.auth is None or request.user is None:
            return False
        match = request.resolver_match
        scopes = roles.api_scopes(match.url_name if match else None)
        if request.auth.scope in scopes:
            return True
        if scopes == roles.ADMIN_TOKEN:
            self.message = "This endpoint needs an admin-scoped token (create_agent --admin)."
        elif scopes:
            needed = " or ".join(sorted(scopes))
            self.message = f"This endpoint needs a token of scope {needed}."
        return False


class BearerScheme(OpenApiAuthenticationExtension):
    target_class = "agents.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "Cairn agent token"}
