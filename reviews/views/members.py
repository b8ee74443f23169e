"""Members (admins only): add a person (an existing user, or a new one with a password
shown once), change a role, remove someone. Every change goes through
``memory.identity.members`` (role-checked again there, audited)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from memory.identity.members import (
    member_add,
    member_get,
    member_list,
    member_remove,
    member_role_set,
)
from memory.identity.roles import role_lines
from memory.models import Role
from reviews.access import actor_for, call_service, require_role
from reviews.htmx import redirect_back

TEMPLATE = "reviews/members.html"


def _page(request, *, status: int = 200, **extra):
    context = {
        "members": member_list(workspace=request.workspace),
        "roles": Role.values,
        "role_lines": [sentence for _, sentence in role_lines()],
        "me": request.user.pk,
        **extra,
    }
    return render(request, TEMPLATE, context, status=status)


@require_role
@require_GET
def members(request):
    return _page(request)


@never_cache
@require_role
@require_POST
def members_add(request):
    username = request.POST.get("username", "")
    role = request.POST.get("role", Role.VIEWER)
    result, error = call_service(
        lambda: member_add(
            workspace=request.workspace, username=username, role=role, actor=actor_for(request)
        )
    )
    if error:
        return _page(request, status=422, add_error=error, add_username=username, add_role=role)
    membership, password = result
    # The password is in this one answer only (never in a message or the session).
    return _page(request, added=membership, password=password)


@require_role
@require_POST
def members_role(request, pk: int):
    membership = member_get(workspace=request.workspace, pk=pk)
    if membership is None:
        raise Http404("No such member in this workspace.")
    role = request.POST.get("role", "")
    reason = request.POST.get("reason", "")
    changed, error = call_service(
        lambda: member_role_set(
            membership=membership, role=role, actor=actor_for(request), reason=reason
        )
    )
    if error:
        messages.error(request, error)
    elif changed:
        messages.success(request, f"{membership.user.username} is now {role}.")
    else:
        messages.info(request, "Nothing changed.")
    return redirect_back("reviews:members")


@require_role
@require_POST
def members_remove(request, pk: int):
    membership = member_get(workspace=request.workspace, pk=pk)
    if membership is None:
        raise Http404("No such member in this workspace.")
    _, error = call_service(
        lambda: member_remove(
            membership=membership, actor=actor_for(request), reason=request.POST.get("reason", "")
        )
    )
    if error:
        messages.error(request, error)
    else:
        messages.success(
            request, f"{membership.user.username} is no longer a member of this workspace."
        )
    return redirect_back("reviews:members")
