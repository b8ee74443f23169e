"""Agents and tokens (admin only): create agents, issue tokens (shown once), revoke."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_POST

from cairn.errors import ApplicationError
from memory.identity.selectors import AGENT_TOKENS_SHOWN, agent_get, agent_list, token_get
from memory.identity.services import agent_create, token_issue, token_revoke
from reviews.access import actor_for, require_role
from reviews.forms import ReasonForm
from reviews.htmx import redirect_back, render_action, render_page, wants_fragment
from reviews.pagination import paginate

TEMPLATE = "reviews/agents.html"


def _list_context(request) -> dict:
    q = request.GET.get("q", "").strip()[:128]
    page = paginate(
        request, agent_list(workspace=request.workspace, name_contains=q), ordering=("name", "id")
    )
    return {
        "page": page,
        "q": q,
        "list_url": reverse("reviews:agents"),
        "tokens_shown": AGENT_TOKENS_SHOWN,
    }


def _agent_or_404(request, pk):
    agent = agent_get(workspace=request.workspace, pk=pk)
    if agent is None:
        raise Http404("No such agent in this workspace.")
    return agent


@require_role
@require_GET
def agents(request):
    return render_page(request, TEMPLATE, _list_context(request), partial="rows")


@require_role
@require_POST
def agents_create(request):
    name = request.POST.get("name", "")
    try:
        agent = agent_create(workspace=request.workspace, name=name, actor=actor_for(request))
    except ApplicationError as exc:
        if wants_fragment(request):
            context = {"create_error": exc.message, "form_name": name}
            return render_action(request, f"{TEMPLATE}#agent_form", context, status=422)
        messages.error(request, exc.message)
        return redirect_back("reviews:agents")
    messages.success(request, f"Agent {agent.name} created. Issue it a token to let it in.")
    if wants_fragment(request):
        context = {"agent": _agent_or_404(request, agent.pk), "just_created": True}
        return render_action(request, f"{TEMPLATE}#agent_created", context)
    return redirect_back("reviews:agents")


@require_role
@require_POST
def agents_token_issue(request, pk: int):
    agent = _agent_or_404(request, pk)
    try:
        issued = token_issue(
            agent=agent,
            scope=request.POST.get("scope", "agent"),
            name=request.POST.get("name", ""),
            created_by=request.user,
        )
    except ApplicationError as exc:
        if wants_fragment(request):
            context = {"agent": agent, "issue_error": exc.message}
            return render_action(request, f"{TEMPLATE}#agent_card", context, status=422)
        messages.error(request, exc.message)
        return redirect_back("reviews:agents")
    messages.success(
        request, f"Token cairn_{issued.token.prefix}_… issued for {agent.name}. Copy it now."
    )
    if wants_fragment(request):
        context = {"agent": _agent_or_404(request, pk), "issued": issued}
        response = render_action(request, f"{TEMPLATE}#agent_card", context)
    else:
        # No redirect here: the raw token exists only in this response.
        context = {**_list_context(request), "issued": issued, "issued_on_top": True}
        response = render(request, TEMPLATE, context)
    add_never_cache_headers(response)  # the raw token must not sit in any cache
    return response


@require_role
@require_POST
def agents_token_revoke(request, pk: int):
    token = token_get(workspace=request.workspace, pk=pk)
    if token is None:
        raise Http404("No such token in this workspace.")
    form = ReasonForm(request.POST)
    if not form.is_valid():
        if wants_fragment(request):
            context = {"token": token, "revoke_error": form.first_error()}
            return render_action(request, f"{TEMPLATE}#token_row", context, status=422)
        messages.error(request, form.first_error())
        return redirect_back("reviews:agents")
    if token.revoked_at is not None:
        messages.info(request, f"Token cairn_{token.prefix}_… was already revoked.")
    else:
        token_revoke(token=token, actor=actor_for(request), reason=form.cleaned_data["reason"])
        messages.success(
            request, f"Token cairn_{token.prefix}_… revoked. Requests with it now get 401."
        )
    if wants_fragment(request):
        # The row, and out of band the agent's "N active tokens" line and the counters.
        agent = agent_get(workspace=request.workspace, pk=token.agent_id)
        return render_action(request, f"{TEMPLATE}#token_revoked", {"token": token, "agent": agent})
    return redirect_back("reviews:agents")
