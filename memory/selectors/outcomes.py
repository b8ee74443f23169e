"""Reads for the outcomes browser: lists per turn, and why a turn passed or not.

``outcome_explain`` re-derives the verdict from the stored approach and checks
with the service's own rule function (``outcome_verdict``), so the words on the
page cannot drift from what the server decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import F, Func, IntegerField, QuerySet

from memory.models import Agent, LessonEvidence, Outcome, Workspace
from memory.services.outcomes import check_identity, outcome_verdict

OUTCOME_ORDER = ("-created_at", "-id")


class JsonbLength(Func):
    function = "jsonb_array_length"
    output_field = IntegerField()


def outcome_list(
    *,
    workspace: Workspace,
    agent_id: int | None = None,
    session_id: str = "",
    project_digest: str = "",
    passed: str = "",
) -> QuerySet[Outcome]:
    """Newest first, one row per turn. ``passed`` is ``yes``, ``no``, ``unverified`` or ''.

    The big JSON columns stay in the database: the list shows their lengths only.
    """
    qs = Outcome.objects.filter(workspace=workspace)
    if agent_id:
        qs = qs.filter(agent_id=agent_id)
    if session_id:
        qs = qs.filter(session_id=session_id)
    if project_digest:
        qs = qs.filter(project_digest=project_digest)
    if passed in {"yes", "no"}:
        qs = qs.filter(passed=passed == "yes")
    elif passed == "unverified":
        qs = qs.filter(passed__isnull=True)
    return (
        qs.select_related("agent")
        .defer("approach", "checks", "in_play")
        .annotate(approach_count=JsonbLength(F("approach")), checks_count=JsonbLength(F("checks")))
        .order_by(*OUTCOME_ORDER)
    )


def outcome_detail(*, workspace: Workspace, pk: int) -> Outcome | None:
    return Outcome.objects.filter(workspace=workspace, pk=pk).select_related("agent").first()


# An outcome's page lists at most this many lesson rows it is evidence for (a turn is
# evidence for a handful; a bound keeps a pathological one from drowning the page).
OUTCOME_LESSONS_SHOWN = 50


def outcome_lesson_evidence(*, outcome: Outcome) -> list[LessonEvidence]:
    """The lesson rows this outcome supports or contradicted (newest lessons first, at most
    ``OUTCOME_LESSONS_SHOWN + 1`` so the page can say there are more)."""
    return list(
        LessonEvidence.objects.filter(outcome=outcome)
        .select_related("lesson")
        .order_by("-lesson_id")[: OUTCOME_LESSONS_SHOWN + 1]
    )


def check_name(check: dict) -> str:
    return check.get("label") or check.get("kind") or "check"


def _step_name(approach: list[dict], step: int | None) -> str:
    for item in approach:
        if item.get("step") == step:
            return item.get("operation_key", "")
    return ""


@dataclass
class Explanation:
    passed: bool | None  # recomputed now from the stored records
    stored: bool | None  # what the server stored when the outcome came in
    summary: str  # one sentence: the verdict and its deciding reason
    notes: list[str] = field(default_factory=list)  # everything else the rules looked at
    checks: list[dict] = field(default_factory=list)  # each check with its role in the verdict
    last_mutation: int | None = None

    @property
    def matches(self) -> bool:
        return self.passed == self.stored


def _runs(checks: list[dict]) -> str:
    names = [f"{check_name(c)} (step {c['step']})" for c in checks]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def outcome_explain(*, outcome: Outcome) -> Explanation:
    """Why the server says ``passed`` is what it is, in words, from the stored records."""
    approach, checks = outcome.approach or [], outcome.checks or []
    verdict = outcome_verdict(approach=approach, checks=checks, claim_ok=outcome.claim_ok)
    latest, failing, stale = (
        {id(c) for c in verdict.latest},
        {id(c) for c in verdict.failing},
        {id(c) for c in verdict.stale},
    )
    rows = []
    for check in checks:
        if not check.get("ran"):
            role = "not run"
        elif id(check) not in latest:
            role = "older run"
        elif id(check) in failing:
            role = "failed"
        elif id(check) in stale:
            role = "stale"
        else:
            role = "counts"
        rows.append({**check, "name": check_name(check), "role": role})

    edit = verdict.last_mutation
    edit_words = ""
    if edit is not None:
        op = _step_name(approach, edit)
        edit_words = f"the last edit at step {edit}" + (f" ({op})" if op else "")

    if verdict.passed is None:
        summary = (
            f"not verified: none of the {len(checks)} recorded checks ran"
            if checks
            else "not verified: no checks were recorded"
        ) + ", so nothing was confirmed or contradicted."
    elif verdict.failing:
        summary = "failed: " + "; ".join(
            f"latest {check_name(c)} run exited {c.get('exit_code')} at step {c['step']}"
            for c in verdict.failing
        )
        summary += "."
    elif verdict.stale:
        summary = "failed: " + "; ".join(
            f"latest {check_name(c)} run at step {c['step']} is stale" for c in verdict.stale
        )
        summary += f", it ran before {edit_words}."
    elif not verdict.passed:
        summary = (
            "failed: every latest check exited 0"
            + (f" after {edit_words}" if edit_words else "")
            + ", but the answer misreported its checks (claim_ok is false)."
        )
    else:
        if len(verdict.latest) == 1:
            only = verdict.latest[0]
            summary = f"passed: latest {check_name(only)} run exited 0 at step {only['step']}"
        else:
            summary = f"passed: latest runs of {_runs(verdict.latest)} all exited 0"
        summary += f", after {edit_words}." if edit_words else "; no step edited anything."

    notes = []
    ignored = len(verdict.not_run)
    if ignored and verdict.ran:
        notes.append(
            f"{ignored} check{'s' if ignored > 1 else ''} did not run and {'were' if ignored > 1 else 'was'} ignored."
        )
    older = [r for r in rows if r["role"] == "older run"]
    for row in older:
        newer = next(c for c in verdict.latest if check_identity(c) == check_identity(row))
        notes.append(
            f"The {row['name']} run at step {row['step']} was replaced by the later run at "
            f"step {newer['step']}: only the latest run of each check counts."
        )
    if verdict.failing and verdict.stale:
        notes.append(f"Also stale (ran before {edit_words}): {_runs(verdict.stale)}.")
    if not outcome.claim_ok and (verdict.failing or verdict.stale):
        notes.append("The answer also misreported its checks (claim_ok is false).")
    if outcome.reported_passed is not None:
        notes.append(
            f"The agent reported passed={'true' if outcome.reported_passed else 'false'}; "
            "self-reports are recorded and ignored."
        )
    return Explanation(
        passed=verdict.passed,
        stored=outcome.passed,
        summary=summary,
        notes=notes,
        checks=rows,
        last_mutation=edit,
    )


def outcome_agents(*, workspace: Workspace) -> list[Agent]:
    """Agents to offer in the outcomes filter (bounded, by name)."""
    return list(
        Agent.objects.filter(workspace=workspace)
        .order_by("name", "id")
        .only("id", "name")[: settings.CAIRN_UI_PROJECTS_MAX]
    )


def outcome_projects(*, workspace: Workspace) -> list[str]:
    """Project digests with outcomes (for the filter; bounded, uses the project index)."""
    return list(
        Outcome.objects.filter(workspace=workspace)
        .order_by("project_digest")
        .values_list("project_digest", flat=True)
        .distinct()[: settings.CAIRN_UI_PROJECTS_MAX]
    )
