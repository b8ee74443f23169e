"""Outcomes per turn: what the agent did, which checks ran, and why the server says it
passed (or not), with what that confirmed, contradicted and taught."""

from __future__ import annotations

from django.http import Http404
from django.urls import reverse
from django.views.decorators.http import require_GET

from memory.identity.selectors import project_labels
from memory.lessons.selectors import (
    OUTCOME_LESSONS_SHOWN,
    OUTCOME_ORDER,
    outcome_agents,
    outcome_detail,
    outcome_explain,
    outcome_lesson_evidence,
    outcome_list,
    outcome_projects,
)
from reviews.access import require_role
from reviews.htmx import render_page
from reviews.pagination import paginate
from reviews.views.situations import outcome_situations

VERDICTS = [("yes", "passed"), ("no", "failed"), ("unverified", "not verified")]
CHANNELS = [
    ("harness", "harness-verified"),
    ("agent", "the agent's own word (self-report)"),
    ("person", "a person"),
]


@require_role
@require_GET
def outcomes(request):
    workspace = request.workspace
    try:
        agent_id = int(request.GET.get("agent", "") or 0)
    except ValueError:
        agent_id = 0
    session = request.GET.get("session", "").strip()[:200]
    project = request.GET.get("project", "").strip()[:64]
    passed = request.GET.get("passed", "")
    if passed not in dict(VERDICTS):
        passed = ""
    channel = request.GET.get("channel", "")
    if channel not in dict(CHANNELS):
        channel = ""
    queryset = outcome_list(
        workspace=workspace,
        agent_id=agent_id,
        session_id=session,
        project_digest=project,
        passed=passed,
        channel=channel,
    )
    page = paginate(request, queryset, ordering=OUTCOME_ORDER)

    def projects():
        digests = outcome_projects(workspace=workspace)
        names = project_labels(workspace=workspace, digests=digests)
        return [(d, names.get(d, "")) for d in digests]

    context = {
        "page": page,
        "agent": agent_id or "",
        "session": session,
        "project": project,
        "passed": passed,
        "channel": channel,
        "channels": CHANNELS,
        "filtered": bool(agent_id or session or project or passed or channel),
        # Callables: only the full page (its filter form) pays for these queries.
        "agents": lambda: outcome_agents(workspace=workspace),
        "projects": projects,
        "verdicts": VERDICTS,
        "labels": project_labels(workspace=workspace, digests=[o.project_digest for o in page]),
        "list_url": reverse("reviews:outcomes"),
    }
    return render_page(request, "reviews/outcomes.html", context, partial="rows")


def _refs(refs: list[dict]) -> list[dict]:
    """In-play and effect references with the page each one links to (if any)."""
    out = []
    for ref in refs or []:
        kind, pk = ref.get("type"), ref.get("id")
        url = ""
        if kind == "lesson":
            url = reverse("reviews:lessons_detail", args=[pk])
        elif kind in ("knowledge", "error"):
            url = reverse("reviews:knowledge_detail", args=[pk])
        out.append({"type": kind, "id": pk, "url": url})
    return out


@require_role
@require_GET
def outcomes_detail(request, pk: int):
    outcome = outcome_detail(workspace=request.workspace, pk=pk)
    if outcome is None:
        raise Http404("No such outcome in this workspace.")
    explanation = outcome_explain(outcome=outcome)
    evidence = outcome_lesson_evidence(outcome=outcome)
    response = outcome.response or {}
    context = {
        "outcome": outcome,
        "why": explanation,
        "approach": sorted(outcome.approach or [], key=lambda a: a.get("step", 0)),
        "confirmed": _refs(response.get("confirmed")),
        "contradicted": _refs(response.get("contradicted")),
        "created": _refs(
            [{"type": "lesson", "id": i} for i in response.get("lessons_created", [])]
        ),
        "in_play": _refs(outcome.in_play),
        "lesson_evidence": evidence[:OUTCOME_LESSONS_SHOWN],
        "more_lessons": len(evidence) > OUTCOME_LESSONS_SHOWN,
        "labels": project_labels(workspace=request.workspace, digests=[outcome.project_digest]),
        "situations": outcome_situations(outcome),
    }
    return render_page(request, "reviews/outcome_detail.html", context, partial="detail")
