"""Workspace settings (admin only): the switches a person may change, each audited."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from memory.identity.services import (
    AUTO_APPROVE_SETTING,
    GOAL_TEXT_SETTING,
    WORKSPACE_SETTINGS_EDITABLE,
    workspace_setting,
    workspace_setting_set,
)
from reviews.access import actor_for, call_service, require_role

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
    workspace = request.workspace
    context = {
        "store_goal_text": workspace_setting(workspace=workspace, name=GOAL_TEXT_SETTING),
        "goal_text_help": WORKSPACE_SETTINGS_EDITABLE[GOAL_TEXT_SETTING],
        "auto_approve": workspace_setting(workspace=workspace, name=AUTO_APPROVE_SETTING),
        "auto_approve_help": WORKSPACE_SETTINGS_EDITABLE[AUTO_APPROVE_SETTING],
    }
    return render(request, "reviews/workspace_settings.html", context)


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
