"""Role guards for the review UI. Every view resolves the current membership here."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.http import Http404, HttpResponse

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.identity import roles
from memory.identity.services import membership_get, membership_get_by_name
from memory.models import Membership

SESSION_KEY = "cairn_workspace_id"
# Every shareable review link names its workspace: /deltas/6/?ws=<workspace name>.
WORKSPACE_PARAM = "ws"


def link_membership(request) -> Membership | None:
    """The membership a link's ``?ws=`` names, after switching to it if it must.

    1. No ``ws``: None (the session's workspace applies).
    2. A workspace the person does not belong to (or none of that name): 404,
       exactly like an object of another workspace, so a link reveals nothing.
    3. Another workspace of theirs: a plain page load switches the session to it
       and records ``request.workspace_switched`` (the base template's banner); an
       htmx request (polling, an action) is served in it without switching, so a
       background tab never moves the person's session.
    """
    name = request.GET.get(WORKSPACE_PARAM)
    if name is None:
        return None
    target = membership_get_by_name(user=request.user, workspace_name=name.strip()[:100])
    if target is None:
        raise Http404("No such page in your workspaces.")
    current = current_membership(request)
    if current is not None and current.workspace_id == target.workspace_id:
        return current
    if request.method == "GET" and not request.headers.get("HX-Request"):
        request.session[SESSION_KEY] = target.workspace_id
        request.workspace_switched = {
            "to": target.workspace.name,
            "from": current.workspace.name if current else "",
        }
    request._cairn_membership = target
    return target


def current_membership(request) -> Membership | None:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not hasattr(request, "session"):
        return None
    cached = getattr(request, "_cairn_membership", False)
    if cached is not False:
        return cached
    membership = membership_get(user=request.user, workspace_id=request.session.get(SESSION_KEY))
    if membership is None and request.session.get(SESSION_KEY) is not None:
        membership = membership_get(user=request.user)
    request._cairn_membership = membership
    return membership


class RoleNeeded(PermissionDenied):
    """A page refused for the role: the 403 page says which role the roles table asks
    for and which one the person holds (``reviews.session.forbidden``)."""

    def __init__(self, *, needed: str, membership: Membership | None):
        super().__init__(f"This needs the {needed} role in this workspace.")
        self.needed = needed
        self.membership = membership


class RoleMiddleware(LoginRequiredMiddleware):
    """Login by default, and the role ``memory.identity.roles`` declares, before any view.

    Django's ``LoginRequiredMiddleware`` (every page needs a login unless marked
    otherwise), extended with the one roles table:

    - a review-UI route is looked up in ``UI_ROLES``: undeclared is refused (default
      deny); otherwise the current membership (a link's ``?ws=`` first) must hold the
      declared role, and the view finds it on ``request.membership``;
    - a background poll (``UI_POLLS``) that may not see its page answers 204 "no
      change", never a login page or a refusal swapped into a page;
    - the agent API authenticates with bearer tokens; its table is applied by
      ``agents.auth.ScopeFromTable``;
    - the site routes the table marks public (login, health, schema, docs) are open.
    """

    def process_view(self, request, view_func, view_args, view_kwargs):
        match = request.resolver_match
        name = match.url_name if match else None
        namespace = match.namespace if match else ""
        if namespace == "agents":
            return None
        if namespace == "reviews":
            return self._review_route(request, name)
        if not namespace and roles.SITE_ROUTES.get(name or "") == roles.PUBLIC:
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)

    def _review_route(self, request, name: str | None):
        needed = roles.ui_role(name)
        if needed is None:
            raise PermissionDenied("This page is not open to anyone yet (no role declared).")
        quiet = name in roles.UI_POLLS
        if not request.user.is_authenticated:
            return _nothing_changed() if quiet else self.handle_no_permission(request, None)
        if needed in (roles.PUBLIC, roles.SIGNED_IN):
            return None
        membership = link_membership(request) or current_membership(request)
        if membership is None or not roles.role_allows(held=membership.role, needed=needed):
            if quiet:
                return _nothing_changed()
            raise RoleNeeded(needed=needed, membership=membership)
        request.membership = membership
        request.workspace = membership.workspace
        return None


def _nothing_changed() -> HttpResponse:
    response = HttpResponse(status=204)
    response["Cache-Control"] = "no-store"
    return response


def require_role(view=None, /):
    """Mark a view as one ``RoleMiddleware`` guards; the role is ``UI_ROLES``'s.

    The view may rely on ``request.membership`` and ``request.workspace``. Used bare
    (``@require_role``); the old ``@require_role("reviewer")`` form is refused when
    its role is not the table's, so a second declaration cannot drift from the first.
    """
    stated = None
    if isinstance(view, str):
        stated, view = view, None

    def decorator(view):
        @functools.wraps(view)
        def wrapped(request, *args, **kwargs):
            if not hasattr(request, "membership"):
                raise ImproperlyConfigured("RoleMiddleware must run before a review view.")
            declared = roles.ui_role(request.resolver_match.url_name)
            if stated is not None and stated != declared:
                raise ImproperlyConfigured(
                    f"{view.__qualname__} states {stated!r}, the roles table {declared!r}."
                )
            try:
                return view(request, *args, **kwargs)
            except Http404:
                request.cairn_elsewhere = _elsewhere(request, view, declared, args, kwargs)
                raise

        wrapped.role_stated = stated
        return wrapped

    return decorator if view is None else decorator(view)


def _elsewhere(request, view, role: str, args, kwargs) -> str:
    """The name of another of the person's workspaces where this page exists, or "".

    A link without ``?ws=`` (an old bookmark, a pasted URL) to an item of another of
    their workspaces was a bare 404. The 404 page offers to open it there instead: the
    same view is asked again in each other workspace where the person has the role,
    for a plain page load only (a GET changes nothing), and nothing about a workspace
    they are not in is revealed.
    """
    if request.method != "GET" or request.headers.get("HX-Request"):
        return ""
    if request.GET.get(WORKSPACE_PARAM) is not None:
        return ""
    current = request.membership
    others = (
        Membership.objects.select_related("workspace")
        .filter(user=request.user)
        .exclude(workspace_id=current.workspace_id)
        .order_by("workspace__name")
    )
    try:
        for other in others:
            if not roles.role_allows(held=other.role, needed=role):
                continue
            request._cairn_membership = request.membership = other
            request.workspace = other.workspace
            try:
                response = view(request, *args, **kwargs)
            except (Http404, PermissionDenied):
                continue
            if response.status_code == 200:
                return other.workspace.name
    finally:
        request._cairn_membership = request.membership = current
        request.workspace = current.workspace
    return ""


def actor_for(request) -> Actor:
    """The person behind a request, as services take it."""
    return Actor.for_user(request.user)


T = TypeVar("T")


def call_service(call: Callable[[], T]) -> tuple[T | None, str]:
    """Run a service call for a person: ``(its result, "")``, or ``(None, the refusal's
    message)``; a 403 refusal (the service's own role check) is ``PermissionDenied``."""
    result, refusal = call_service_refusal(call)
    return result, refusal.message if refusal else ""


def call_service_refusal(call: Callable[[], T]) -> tuple[T | None, ApplicationError | None]:
    """``call_service`` for a form that puts each refusal under its field: ``(its
    result, None)`` or ``(None, the refusal)``, whose ``fields`` name the field."""
    try:
        return call(), None
    except ApplicationError as exc:
        if exc.status_code == 403:
            raise PermissionDenied(exc.message) from exc
        return None, exc
