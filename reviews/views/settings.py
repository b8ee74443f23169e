"""Workspace settings (admin only): the switches a person may change, each audited."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from memory.identity.services import (
    GOAL_TEXT_SETTING,
    WORKSPACE_SETTINGS_EDITABLE,
    workspace_setting,
    workspace_setting_set,
)
from reviews.access import actor_for, call_service, require_role


@require_role("admin")
@require_GET
def workspace_settings(request):
    context = {
        "store_goal_text": workspace_setting(workspace=request.workspace, name=GOAL_TEXT_SETTING),
        "goal_text_help": WORKSPACE_SETTINGS_EDITABLE[GOAL_TEXT_SETTING],
    }
    return render(request, "reviews/workspace_settings.html", context)


@require_role("admin")
@require_POST
def workspace_settings_save(request):
    wanted = request.POST.get(GOAL_TEXT_SETTING) == "on"
    changed, error = call_service(
        lambda: workspace_setting_set(
            workspace=request.workspace,
            name=GOAL_TEXT_SETTING,
            value=wanted,
            actor=actor_for(request),
        )
    )
    if error:
        messages.error(request, error)
    elif changed:
        messages.success(
            request,
            "Goal texts are kept from now on."
            if wanted
            else "Goal texts are no longer kept; those already stored stay until erased.",
        )
    else:
        messages.info(request, "Nothing changed.")
    response = redirect("reviews:workspace_settings")
    response.status_code = 303
    return response
