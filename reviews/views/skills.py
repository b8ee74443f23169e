"""Skills and learned facts (read-only): what each skill is, and what agents learned on it.

A skill running with learned deltas carries an overlay badge, so a person can
see at a glance that an agent is not running the shipped text. The skill page
shows its versions and sections and the effective skill of one agent with and
without its learning, and the diff between the two.
"""

from __future__ import annotations

from django.http import Http404
from django.urls import reverse
from django.views.decorators.http import require_GET

from memory.selectors.skills import (
    FACT_ORDER,
    SKILL_ORDER,
    effective_skill_build,
    effective_skill_compose,
    fact_consumers,
    fact_namespace_list,
    fact_review_list,
    skill_agent_get,
    skill_agent_list,
    skill_review_get,
    skill_review_list,
    skill_version_list,
)
from reviews.access import require_role
from reviews.diffs import diff_counts, effective_render, unified_diff
from reviews.htmx import render_page
from reviews.pagination import paginate

VERSIONS_SHOWN = 20
PREVIEW_VIEWS = ("with", "base", "diff")


@require_role("viewer")
@require_GET
def skills(request):
    context = {
        "page": paginate(
            request, skill_review_list(workspace=request.workspace), ordering=SKILL_ORDER
        ),
        "list_url": reverse("reviews:skills"),
    }
    return render_page(request, "reviews/skills.html", context, partial="rows")


def _pick_agent(request, agents: list[dict]):
    """The agent whose effective skill is shown: ?agent=, else the one with most active deltas."""
    wanted = request.GET.get("agent", "")
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


@require_role("viewer")
@require_GET
def skills_detail(request, name: str):
    skill = skill_review_get(workspace=request.workspace, name=name)
    if skill is None or skill.current_version is None:
        raise Http404("No such skill in this workspace.")
    view = request.GET.get("view", "with")
    if view not in PREVIEW_VIEWS:
        view = "with"
    agents = skill_agent_list(skill=skill)
    agent = _pick_agent(request, agents)
    if agent is None:
        # No agent has learned anything on this skill: every agent gets the base.
        base = learned = effective_skill_compose(
            skill=skill, version=skill.current_version, deltas=[], registry={}
        )
    else:
        base = effective_skill_build(agent=agent, skill=skill, learned=False)
        learned = effective_skill_build(agent=agent, skill=skill, learned=True)
    diff = unified_diff(effective_render(base), effective_render(learned))
    versions, version_total = skill_version_list(skill=skill, limit=VERSIONS_SHOWN)
    previous = versions[1] if len(versions) > 1 else None
    context = {
        "skill": skill,
        "version": skill.current_version,
        "agents": agents,
        "agent": agent,
        "view": view,
        "base": base,
        "learned": learned,
        "diff": diff,
        "diff_counts": diff_counts(diff),
        "sections": _sections(skill.current_version, previous),
        "previous": previous,
        "versions": versions,
        "version_total": version_total,
        "detail_url": reverse("reviews:skills_detail", args=[skill.name]),
    }
    return render_page(request, "reviews/skill_detail.html", context, partial="preview")


@require_role("viewer")
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
