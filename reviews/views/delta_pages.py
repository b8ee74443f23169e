"""Finding a delta again: its permalink page and each queue's "Decided" list.

- ``/deltas/<id>/``: one delta wherever it is now (pending, active, archived),
  with its diff and its whole history from the audit log, oldest first: created
  (with the injection scan's verdict), decided, orphaned, re-approved, reverted,
  each with who, when and why. Audit entries, the skill page and the queues link here.
- ``/deltas/<queue>/decided/``: what left that queue, newest first, with the
  decision, who made it, when and why; filtered by decision, person, skill, agent.
"""

from __future__ import annotations

from django.http import Http404
from django.urls import reverse
from django.views.decorators.http import require_GET

from memory.identity.selectors import agent_list
from memory.models import DeltaStatus
from memory.skills.decisions import decision_rebuild
from memory.skills.selectors import (
    DECISION_ORDER,
    delta_decision_attach,
    delta_decision_list,
    delta_history,
    delta_review_get,
)
from memory.skills.trust import TRUST_SAMPLES_SHOWN, trust_sample_list
from reviews.access import require_role
from reviews.diffs import diff_counts, diff_digest, sectioned_render, side_by_side, unified_diff
from reviews.htmx import render_page
from reviews.pagination import paginate
from reviews.views.deltas import with_previews

# Queue (as in the URL) -> the status its deltas have while they wait there.
QUEUES = {
    "staged": DeltaStatus.STAGED,
    "quarantine": DeltaStatus.QUARANTINED,
    "orphans": DeltaStatus.ORPHANED,
}
QUEUE_TITLES = {"staged": "Staged", "quarantine": "Quarantine", "orphans": "Orphans"}
DECISIONS = ("approved", "rejected")

# What each audited action means in a delta's history.
HISTORY_LABELS = {
    "delta.create": "proposed",
    "delta.repeat": "proposed again (counted, not staged twice)",
    "delta.approve": "approved",
    "delta.auto_approve": "approved automatically",
    "delta.confirm_quarantined": "confirmed (untrusted, checked by a person)",
    "delta.reject": "rejected",
    "delta.orphan": "orphaned by a skill update",
    "delta.reapprove": "re-approved onto the current version",
    "delta.revert": "reverted",
    "delta.reset": "archived by a reset to the authored skill",
    "delta.archive": "archived",
    "delta.umbrella_propose": "proposed as an umbrella over near-identical deltas",
    "delta.demote_retrieval": "moved to retrieval-only (over the token budget)",
    "delta.promote_resident": "back in the resident prompt (fits the budget again)",
}
# Where a delta in each status is worked on.
STATUS_QUEUES = {
    DeltaStatus.STAGED: "reviews:staged",
    DeltaStatus.QUARANTINED: "reviews:quarantine",
    DeltaStatus.ORPHANED: "reviews:orphans",
}


def _history(delta) -> list:
    events = delta_history(delta=delta)
    for event in events:
        event.label = HISTORY_LABELS.get(event.action, event.action.removeprefix("delta."))
        details = event.details or {}
        event.status_from = details.get("from", "")
        event.status_to = details.get("to", "") or details.get("status", "")
        event.findings = details.get("findings") if event.action == "delta.create" else None
    return events


# How an archived delta got there, in the words its page heads with ("rejected by ann").
ENDINGS = {
    "delta.reject": "rejected",
    "delta.revert": "reverted",
    "delta.reset": "archived by a reset",
    "delta.archive": "archived",
}


def _ending(delta, history: list):
    """The event that archived ``delta`` (the newest one that can), or None: an archived
    delta read as a bare "archived", with no word of who rejected it or why."""
    if delta.status != DeltaStatus.ARCHIVED:
        return None
    for event in reversed(history):
        if event.action in ENDINGS:
            event.ending = ENDINGS[event.action]
            return event
    return None


def _decided_diff(delta) -> dict | None:
    """The diff the person who decided ``delta`` was shown, rebuilt from what was kept.

    ``moved_on``: the skill has a newer version, or today's diff differs (other
    learned lines came or went). ``exact``: the rebuild matches the digest kept
    at decision time (it cannot when a delta it showed was erased since).
    """
    rebuilt = decision_rebuild(delta=delta)
    if rebuilt is None:
        return None
    body = rebuilt["version"].body
    lines = unified_diff(
        sectioned_render(rebuilt["without"], base_body=body),
        sectioned_render(rebuilt["with"], base_body=body),
    )
    seen = delta.decision_seen
    return {
        "version": rebuilt["version"].version,
        "diff": lines,
        "rows": side_by_side(lines),
        "counts": diff_counts(lines),
        "exact": diff_digest(lines) == seen.get("digest") and not rebuilt["missing"],
        "moved_on": rebuilt["version"].pk != delta.skill.current_version_id
        or seen.get("digest") != diff_digest(delta.diff),
    }


@require_role
@require_GET
def deltas_detail(request, pk: int):
    delta = delta_review_get(workspace=request.workspace, pk=pk)
    if delta is None:
        raise Http404("No such delta in this workspace.")
    with_previews(request.workspace, [delta])
    queue = STATUS_QUEUES.get(delta.status)
    history = _history(delta)
    context = {
        "delta": delta,
        "decided": _decided_diff(delta),
        "history": history,
        "ended": _ending(delta, history),
        "samples": trust_sample_list(workspace=request.workspace, scope=delta.scope),
        "samples_shown": TRUST_SAMPLES_SHOWN,
        "queue_url": f"{reverse(queue)}#delta-{delta.pk}" if queue else "",
        "skill_url": f"{reverse('reviews:skills_detail', args=[delta.skill.name])}"
        f"?agent={delta.agent_id}",
    }
    return render_page(request, "reviews/delta_detail.html", context, partial="history")


def _decided_filters(request) -> dict:
    decision = request.GET.get("decision", "")
    agent = request.GET.get("agent", "").strip()
    return {
        "decision": decision if decision in DECISIONS else "",
        "actor": request.GET.get("actor", "").strip()[:200],
        "skill": request.GET.get("skill", "").strip()[:64],
        "agent": int(agent) if agent.isdigit() else None,
    }


def _decided(request, queue: str):
    filters = _decided_filters(request)
    events = delta_decision_list(
        workspace=request.workspace,
        status=QUEUES[queue],
        decision=filters["decision"],
        actor=filters["actor"],
        skill_name=filters["skill"],
        agent_id=filters["agent"],
    )
    page = paginate(request, events, ordering=DECISION_ORDER)
    delta_decision_attach(workspace=request.workspace, events=page.items)
    list_url = reverse(f"reviews:{queue}_decided")
    context = {
        **{f"filter_{name}": value for name, value in filters.items()},
        "page": page,
        "queue": queue,
        "queue_title": QUEUE_TITLES[queue],
        "queue_url": reverse(f"reviews:{queue}"),
        "decisions": DECISIONS,
        # A callable: only the full page (its filter form) lists the agents.
        "agents": lambda: agent_list(workspace=request.workspace).values("id", "name"),
        "filtered": any(v not in ("", None) for v in filters.values()),
        "list_url": list_url,
    }
    return render_page(request, "reviews/decided.html", context, partial="rows")


@require_role
@require_GET
def staged_decided(request):
    return _decided(request, "staged")


@require_role
@require_GET
def quarantine_decided(request):
    return _decided(request, "quarantine")


@require_role
@require_GET
def orphans_decided(request):
    return _decided(request, "orphans")
