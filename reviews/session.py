"""What the review UI says when a session ends or a request is refused.

- An htmx request from a tab whose session has ended (logged out elsewhere,
  expired) gets ``HX-Redirect`` to the login page, so the whole page goes there,
  instead of the login form being swapped into a card.
- Every 403 says what happened: the session's security token is stale (CSRF),
  or the role is not enough. For htmx the reason travels in ``X-Cairn-Message``,
  which static/js/cairn.js shows as the toast.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from django.conf import settings
from django.shortcuts import render, resolve_url

from memory.identity.roles import role_lines

MESSAGE_HEADER = "X-Cairn-Message"
CSRF_MESSAGE = (
    "This page's security token is out of date (the session ended or was renewed in "
    "another tab). Reload the page and try again; nothing was changed."
)
EXPIRED_MESSAGE = "Your session has ended. Log in again; nothing was changed."


class ExpiredSessionMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not request.headers.get("HX-Request") or response.status_code not in (301, 302, 303):
            return response
        login = resolve_url(settings.LOGIN_URL)
        if urlsplit(response.get("Location", "")).path != login:
            return response
        # The page's query comes along (its ?ws= above all): login returns to the same view.
        page = urlsplit(request.headers.get("HX-Current-URL", ""))
        current = (page.path or "/") + (f"?{page.query}" if page.query else "")
        response.status_code = 200
        response["HX-Redirect"] = f"{login}?next={quote(current)}"
        response[MESSAGE_HEADER] = EXPIRED_MESSAGE
        del response["Location"]
        return response


def _role_context(exception) -> dict:
    """For a refusal by role: the role the page needs, the one the person holds and
    every role's sentence, all from the roles table (``role_lines``), so the page says
    what the server enforces."""
    from reviews.access import RoleNeeded

    if not isinstance(exception, RoleNeeded):
        return {}
    membership = exception.membership
    return {
        "needed_role": exception.needed,
        "held_role": membership.role if membership else "",
        "workspace_name": membership.workspace.name if membership else "",
        "role_lines": role_lines(),
    }


def forbidden(request, exception=None):
    """handler403: the reason in the page, and in a header for htmx toasts."""
    reason = str(exception) if exception and str(exception) else ""
    if not reason:
        reason = "Your role in this workspace does not allow that."
    context = {"exception": reason, **_role_context(exception)}
    response = render(request, "403.html", context, status=403)
    response[MESSAGE_HEADER] = reason
    return response


def csrf_failure(request, reason=""):
    response = render(request, "403.html", {"exception": CSRF_MESSAGE}, status=403)
    response[MESSAGE_HEADER] = CSRF_MESSAGE
    return response
