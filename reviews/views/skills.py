"""Skills and learned facts: what each skill is, and what agents learned on it.

A skill running with learned deltas carries an overlay badge, so a person can
see at a glance that an agent is not running the shipped text. The skill page
shows its versions and sections and the effective skill of one agent with and
without its learning, and the diff between the two; a reviewer can revert one
active delta there, or reset an agent to the authored skill.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from memory.models import DeltaStatus
from memory.skills.consent import delta_reset, delta_revert
from memory.skills.effective import effective_skill_build, effective_skill_compose
from memory.skills.selectors import (
    FACT_ORDER,
    SKILL_ORDER,
    delta_review_get,
    fact_consumers,
    fact_namespace_list,
    fact_review_list,
    skill_agent_get,
    skill_agent_list,
    skill_review_get,
    skill_review_list,
    skill_version_list,
)
from reviews.access import actor_for, call_service, require_role
from reviews.diffs import diff_counts, sectioned_render, unified_diff
from reviews.forms import ReasonForm
from reviews.htmx import redirect_back, render_action, render_page, wants_fragment
from reviews.pagination import paginate

VERSIONS_SHOWN = 20
PREVIEW_VIEWS = ("with", "base", "diff")


@require_role
@require_GET
def skills(request):
    context = {
        "page": paginate(
            request, skill_review_list(workspace=request.workspace), ordering=SKILL_ORDER
        ),
        "list_url": reverse("reviews:skills"),
    }
    return render_page(request, "reviews/skills.html", context, partial="rows")


def _pick_agent(request, wanted: str, agents: list[dict]):
    """The agent whose effective skill is shown: ``wanted``, else the one with most active deltas."""
    ids = {a["id"] for a in agents}
    if wanted.isdigit() and int(wanted) in ids:
        chosen = int(wanted)
    elif agents:
        chosen = max(agents, key=lambda a: (a["active"], -a["id"]))["id"]
    else:
        return None
    return skill_agent_get(workspace=request.workspace, pk=chosen)


def _sections(current, previous) -> list[dict]:
    """The current version's sections, each marked new/changed/same against the previous one."""
    before = {s["slug"]: s["digest"] for s in (previous.sections if previous else [])}
    rows = []
    for section in current.sections:
        if previous is None:
            change = ""
        elif section["slug"] not in before:
            change = "new"
        elif before[section["slug"]] != section["digest"]:
            change = "changed"
        else:
            change = "same"
        rows.append({**section, "change": change})
    return rows


def _skill_or_404(request, name: str):
    skill = skill_review_get(workspace=request.workspace, name=name)
    if skill is None or skill.current_version is None:
        raise Http404("No such skill in this workspace.")
    return skill


def _preview_context(request, skill, *, agent_id: str, view: str, errors: dict | None = None):
    """The effective-skill card: one agent's skill with and without learning, and the diff."""
    errors = errors or {}
    if view not in PREVIEW_VIEWS:
        view = "with"
    agents = skill_agent_list(skill=skill)
    agent = _pick_agent(request, agent_id, agents)
    if agent is None:
        # No agent has learned anything on this skill: every agent gets the base.
        base = learned = effective_skill_compose(
            skill=skill, version=skill.current_version, deltas=[], registry={}
        )
    else:
        base = effective_skill_build(agent=agent, skill=skill, learned=False)
        learned = effective_skill_build(agent=agent, skill=skill, learned=True)
    for entry in learned["applied"]:
        entry["error"] = errors.get("revert", {}).get(entry["id"], "")
        revert = reverse("reviews:skills_revert", args=[skill.name, entry["id"]])
        entry["revert_url"] = f"{revert}?{urlencode({'view': view})}"
    body = skill.current_version.body
    diff = unified_diff(
        sectioned_render(base, base_body=body), sectioned_render(learned, base_body=body)
    )
    chosen = next((a for a in agents if agent and a["id"] == agent.pk), None)
    return {
        "skill": skill,
        "version": skill.current_version,
        "agents": agents,
        "agent": agent,
        "agent_counts": chosen,
        "view": view,
        "base": base,
        "learned": learned,
        "diff": diff,
        "diff_counts": diff_counts(diff),
        "reset_error": errors.get("reset", ""),
        "reset_url": (
            f"{reverse('reviews:skills_reset', args=[skill.name])}?"
            f"{urlencode({'agent': agent.pk, 'view': view})}"
            if agent
            else ""
        ),
        "detail_url": reverse("reviews:skills_detail", args=[skill.name]),
    }


@require_role
@require_GET
def skills_detail(request, name: str):
    skill = _skill_or_404(request, name)
    context = _preview_context(
        request, skill, agent_id=request.GET.get("agent", ""), view=request.GET.get("view", "")
    )
    versions, version_total = skill_version_list(skill=skill, limit=VERSIONS_SHOWN)
    previous = versions[1] if len(versions) > 1 else None
    context.update(
        {
            "sections": _sections(skill.current_version, previous),
            "previous": previous,
            "versions": versions,
            "version_total": version_total,
        }
    )
    return render_page(request, "reviews/skill_detail.html", context, partial="preview")


def _preview_answer(request, name: str, *, agent_id, errors: dict, error: str):
    """After a revert or reset: the refreshed card for htmx, else back to the skill page."""
    view = request.GET.get("view", "")
    if wants_fragment(request):
        skill = _skill_or_404(request, name)  # fresh counts for the overlay badge
        context = _preview_context(request, skill, agent_id=str(agent_id), view=view, errors=errors)
        return render_action(
            request, "reviews/skill_detail.html#preview", context, status=422 if error else 200
        )
    if error:
        messages.error(request, error)
    url = reverse("reviews:skills_detail", args=[name])
    return redirect_back(f"{url}?{urlencode({'agent': agent_id, 'view': view or 'with'})}")


@require_role
@require_POST
def skills_revert(request, name: str, pk: int):
    """Archive one active delta: the agent gets the skill without it from its next session."""
    skill = _skill_or_404(request, name)
    delta = delta_review_get(workspace=request.workspace, pk=pk)
    if delta is None or delta.skill_id != skill.pk:
        raise Http404("No such delta on this skill.")
    form = ReasonForm(request.POST)
    error = ""
    if not form.is_valid():
        error = form.first_error()
    elif delta.status != DeltaStatus.ACTIVE:
        messages.info(request, f"Delta #{pk} is {delta.status}, not active; nothing changed.")
    else:
        _, error = call_service(
            lambda: delta_revert(
                delta=delta, actor=actor_for(request), reason=form.cleaned_data["reason"]
            )
        )
        if not error:
            messages.success(
                request,
                f"Delta #{pk} reverted: {delta.agent.name} gets {skill.name} without it "
                "from its next session.",
            )
    errors = {"revert": {pk: error}} if error else {}
    return _preview_answer(request, name, agent_id=delta.agent_id, errors=errors, error=error)


@require_role
@require_POST
def skills_reset(request, name: str):
    """Archive every delta one agent has on the skill: back to the authored text."""
    skill = _skill_or_404(request, name)
    agent_id = request.GET.get("agent", "")
    agent = (
        skill_agent_get(workspace=request.workspace, pk=int(agent_id))
        if agent_id.isdigit()
        else None
    )
    if agent is None:
        raise Http404("No such agent in this workspace.")
    form = ReasonForm(request.POST)
    error = "" if form.is_valid() else form.first_error()
    if not error:
        count, error = call_service(
            lambda: delta_reset(
                skill=skill,
                agent=agent,
                actor=actor_for(request),
                reason=form.cleaned_data["reason"],
            )
        )
        if not error:
            messages.success(
                request,
                f"{count} learned delta{'s' if count != 1 else ''} of {agent.name} on "
                f"{skill.name} archived: it gets the authored skill from its next session.",
            )
    errors = {"reset": error} if error else {}
    return _preview_answer(request, name, agent_id=agent.pk, errors=errors, error=error)


@require_role
@require_GET
def skills_facts(request):
    namespace = request.GET.get("namespace", "").strip()[:64]
    queryset = fact_review_list(workspace=request.workspace, namespace=namespace)
    page = paginate(request, queryset, ordering=FACT_ORDER)
    consumers = fact_consumers(
        workspace=request.workspace, namespaces=sorted({f.namespace for f in page})
    )
    for fact in page:
        fact.consumers = consumers[fact.namespace]
    workspace = request.workspace
    context = {
        "page": page,
        "namespace": namespace,
        "filtered": bool(namespace),
        # A callable: the template calls it only when it renders the filter (full page).
        "namespaces": lambda: fact_namespace_list(workspace=workspace),
        "list_url": reverse("reviews:skills_facts"),
    }
    return render_page(request, "reviews/facts.html", context, partial="rows")
