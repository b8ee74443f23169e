"""Workspace settings (admin only): the switches a person may change, each audited."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from memory.identity.services import (
    AUTO_APPROVE_SETTING,
    GOAL_TEXT_SETTING,
    WORKSPACE_SETTINGS_EDITABLE,
    workspace_create,
    workspace_setting,
    workspace_setting_set,
)
from reviews.access import SESSION_KEY, actor_for, call_service, require_role

# What a change says, per setting: (turned on, turned off).
SAID = {
    GOAL_TEXT_SETTING: (
        "Goal texts are kept from now on.",
        "Goal texts are no longer kept; those already stored stay until erased.",
    ),
    AUTO_APPROVE_SETTING: (
        "Changes a person asked for are approved at once from now on.",
        "Every learned change waits for a reviewer again.",
    ),
}


@require_role
@require_GET
def workspace_settings(request):
    return render(request, "reviews/workspace_settings.html", _settings_context(request))


def _settings_context(request) -> dict:
    workspace = request.workspace
    return {
        "store_goal_text": workspace_setting(workspace=workspace, name=GOAL_TEXT_SETTING),
        "goal_text_help": WORKSPACE_SETTINGS_EDITABLE[GOAL_TEXT_SETTING],
        "auto_approve": workspace_setting(workspace=workspace, name=AUTO_APPROVE_SETTING),
        "auto_approve_help": WORKSPACE_SETTINGS_EDITABLE[AUTO_APPROVE_SETTING],
    }


@require_role
@require_POST
def workspace_settings_save(request):
    """One setting per form: ``setting`` names it (the goal-text one when absent) and a
    checkbox of the same name says on or off."""
    name = request.POST.get("setting", GOAL_TEXT_SETTING)
    wanted = request.POST.get(name) == "on"
    changed, error = call_service(
        lambda: workspace_setting_set(
            workspace=request.workspace, name=name, value=wanted, actor=actor_for(request)
        )
    )
    if error:
        messages.error(request, error)
    elif changed:
        messages.success(request, SAID[name][0 if wanted else 1])
    else:
        messages.info(request, "Nothing changed.")
    response = redirect("reviews:workspace_settings")
    response.status_code = 303
    return response


@require_role
@require_POST
def workspace_new(request):
    """An admin makes another workspace; they are its first admin and land on its
    dashboard (which starts with "Connect your agent")."""
    name = request.POST.get("name", "")
    workspace, error = call_service(
        lambda: workspace_create(
            name=name,
            display_name=request.POST.get("display_name", ""),
            actor=actor_for(request),
            creator_of=request.workspace,
        )
    )
    if error:
        context = {**_settings_context(request), "new_error": error, "new_name": name}
        return render(request, "reviews/workspace_settings.html", context, status=422)
    request.session[SESSION_KEY] = workspace.pk
    messages.success(request, f"Workspace {workspace.name} created; you are its admin.")
    return redirect(reverse("reviews:dashboard") + "?" + urlencode({"ws": workspace.name}))
