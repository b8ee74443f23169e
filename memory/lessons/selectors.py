"""Reads for outcomes and lessons: lists, history, plan-time context, decision-time check.

Plan-time context (``context_build``) is deterministic: the ``stable`` text is
the same bytes for the same state. Lessons are ranked by confidence x recency,
recency = exp(-days since the lesson's last evidence / 30), where the last
evidence is its creation or its last confidence change other than decay.
Serving a lesson refreshes ``last_used_at`` (so it does not decay) but is not
evidence, so it does not lift the lesson's rank: retrieval cannot feed itself.
Since every score shares the factor exp(-now/30), the order depends on the
state only, never on the clock. At most 5 lessons within 300 tokens, tokens
estimated as ceil(characters / 4); a lesson that does not fit is skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime

from django.conf import settings
from django.db.models import (
    Count,
    DateTimeField,
    F,
    FloatField,
    Func,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce, Greatest

from cairn.errors import NotFoundError
from memory.core.selectors import audit_event_for_targets
from memory.lessons.changes import CHANGES, lesson_change_q
from memory.lessons.verdict import check_identity, outcome_verdict
from memory.models import (
    Agent,
    AuditEvent,
    ConfidenceCause,
    ConfidenceChange,
    Lesson,
    LessonEvidence,
    LessonScope,
    LessonState,
    Outcome,
    TargetType,
    Workspace,
)

DAY_S = 86400.0
BIGINT_MAX = 2**63 - 1


# --- activity (shared with decay) -------------------------------------------------------------


def _ledger(target_type: str):
    return ConfidenceChange.objects.filter(target_type=target_type, target_id=OuterRef("pk"))


def with_activity(queryset: QuerySet, *, target_type: str) -> QuerySet:
    """Annotate ``evidence_at`` (creation or last non-decay confidence change),
    ``activity_at`` (that or the last use, whichever is later) and ``decayed_since``
    (the decay the ledger recorded after ``activity_at``)."""
    last_change = (
        _ledger(target_type).exclude(cause=ConfidenceCause.DECAY).order_by("-at").values("at")[:1]
    )
    queryset = queryset.annotate(
        evidence_at=Greatest(
            F("created_at"),
            Coalesce(Subquery(last_change, output_field=DateTimeField()), F("created_at")),
        )
    ).annotate(
        activity_at=Greatest(F("evidence_at"), Coalesce(F("last_used_at"), F("evidence_at")))
    )
    decayed = (
        _ledger(target_type)
        .filter(cause=ConfidenceCause.DECAY, at__gt=OuterRef("activity_at"))
        .order_by()
        .values("target_id")
        .annotate(total=Sum(F("before") - F("after")))
        .values("total")
    )
    return queryset.annotate(
        decayed_since=Coalesce(Subquery(decayed, output_field=FloatField()), Value(0.0))
    )


def idle_days(*, activity_at: datetime, now: datetime) -> float:
    return max(0.0, (now - activity_at).total_seconds() / DAY_S)


def recency(*, evidence_at: datetime, now: datetime) -> float:
    """exp(-days since the last evidence / 30). Serving is not evidence: it does not count."""
    days = idle_days(activity_at=evidence_at, now=now)
    return math.exp(-days / settings.CAIRN_LESSON_RECENCY_DAYS)


# --- outcomes and lessons ---------------------------------------------------------------------


def lesson_ancestors(*, lesson: Lesson) -> list[Lesson]:
    """Every row that was superseded into ``lesson``, directly or not (breadth first)."""
    seen: dict[int, Lesson] = {}
    frontier = [lesson.pk]
    while frontier:
        rows = list(
            Lesson.objects.filter(
                workspace_id=lesson.workspace_id, superseded_by_id__in=frontier
            ).exclude(pk__in=seen)
        )
        for row in rows:
            seen[row.pk] = row
        frontier = [row.pk for row in rows]
    return list(seen.values())


def lesson_head(*, lesson: Lesson) -> Lesson:
    """The current row of a lesson's lineage (follows ``superseded_by``)."""
    seen = {lesson.pk}
    while lesson.superseded_by_id is not None and lesson.superseded_by_id not in seen:
        seen.add(lesson.superseded_by_id)
        lesson = Lesson.objects.get(workspace_id=lesson.workspace_id, pk=lesson.superseded_by_id)
    return lesson


def outcome_get(*, workspace: Workspace, outcome_id: int) -> Outcome:
    outcome = (
        Outcome.objects.filter(workspace=workspace, pk=outcome_id).first()
        if 0 < outcome_id <= BIGINT_MAX
        else None
    )
    if outcome is None:
        raise NotFoundError(f"No outcome {outcome_id} in this workspace.")
    return outcome


def _with_evidence(queryset: QuerySet, *, workspace_id: int) -> QuerySet:
    return queryset.prefetch_related(
        Prefetch(
            "evidence",
            queryset=LessonEvidence.objects.select_related("outcome").order_by("created_at", "id"),
        ),
        Prefetch(
            "supersedes",
            queryset=Lesson.objects.filter(workspace_id=workspace_id).only(
                "id", "superseded_by_id", "supersede_reason"
            ),
        ),
    )


def lesson_get(*, workspace: Workspace, lesson_id: int) -> Lesson:
    """A lesson of this workspace (any state); 404 for another workspace's, as for a missing id."""
    if not 0 < lesson_id <= BIGINT_MAX:
        raise NotFoundError(f"No lesson {lesson_id} in this workspace.")
    lesson = _with_evidence(
        Lesson.objects.filter(workspace=workspace, pk=lesson_id), workspace_id=workspace.pk
    ).first()
    if lesson is None:
        raise NotFoundError(f"No lesson {lesson_id} in this workspace.")
    return lesson


def lesson_scope_filter(*, project_digest: str) -> Q:
    """Lessons that apply in a project: that project's and the global ones."""
    scope = Q(scope=LessonScope.GLOBAL)
    if project_digest:
        scope |= Q(scope=LessonScope.PROJECT, project_digest=project_digest)
    return scope


def lesson_list(
    *,
    workspace: Workspace,
    state: str | None = None,
    scope: str | None = None,
    operation_key: str | None = None,
    project_digest: str | None = None,
    include_superseded: bool = False,
) -> QuerySet:
    lessons = Lesson.objects.filter(workspace=workspace)
    if not include_superseded:
        lessons = lessons.filter(superseded_by__isnull=True)
    if state:
        lessons = lessons.filter(state=state)
    if scope:
        lessons = lessons.filter(scope=scope)
    if operation_key:
        lessons = lessons.filter(operation_key=operation_key)
    if project_digest:
        lessons = lessons.filter(lesson_scope_filter(project_digest=project_digest))
    return _with_evidence(lessons.order_by("-created_at", "-id"), workspace_id=workspace.pk)


def lesson_evidence_summary(lesson: Lesson) -> dict:
    """Outcome ids that support, that contradicted, and that its author cited for this
    row (uses the prefetch)."""
    rows = list(lesson.evidence.all())
    return {
        "evidence": [r.outcome_id for r in rows if r.relation == LessonEvidence.Relation.SUPPORTS],
        "contradicted_by": [
            r.outcome_id for r in rows if r.relation == LessonEvidence.Relation.CONTRADICTS
        ],
        "cited": [r.outcome_id for r in rows if r.relation == LessonEvidence.Relation.CITED],
        "sources": sorted(
            s.pk for s in lesson.supersedes.all() if s.supersede_reason == "promoted"
        ),
    }


def lesson_history(*, lesson: Lesson) -> dict:
    """The whole lineage around ``lesson``: its current row and every row superseded into
    it, oldest first, each with its evidence (outcome ids) and its ledger."""
    head = lesson_head(lesson=lesson)
    ids = [head.pk] + [row.pk for row in lesson_ancestors(lesson=head)]
    workspace_id = lesson.workspace_id
    rows = list(
        _with_evidence(
            Lesson.objects.filter(workspace_id=workspace_id, pk__in=ids), workspace_id=workspace_id
        ).order_by("created_at", "id")
    )
    changes: dict[int, list[dict]] = {pk: [] for pk in ids}
    for change in ConfidenceChange.objects.filter(
        workspace_id=workspace_id, target_type=TargetType.LESSON, target_id__in=ids
    ).order_by("at", "id"):
        changes[change.target_id].append(
            {
                "before": change.before,
                "after": change.after,
                "kind": change.kind,
                "cause": change.cause,
                "channel": change.channel,
                "evidence_id": change.evidence_id,
                "at": change.at,
            }
        )
    versions = []
    for row in rows:
        versions.append(
            {
                "lesson": row,
                "outcomes": [
                    {
                        "id": ev.outcome_id,
                        "outcome_id": ev.outcome.outcome_id,
                        "relation": ev.relation,
                        "passed": ev.outcome.passed,
                        "at": ev.created_at,
                    }
                    for ev in row.evidence.all()
                ],
                "changes": changes[row.pk],
            }
        )
    return {"id": head.pk, "versions": versions}


# --- plan time and decision time ----------------------------------------------------------------


# --- the review UI's lessons browser --------------------------------------------------------

# Sort orders offered by the browser; each ends in the primary key so keyset paging works.
LESSON_ORDERS = {
    "new": ("-created_at", "-id"),
    "strong": ("-confidence", "-id"),
    "weak": ("confidence", "id"),
}


def _evidence_count(relation: str) -> Subquery:
    rows = (
        LessonEvidence.objects.filter(lesson=OuterRef("pk"), relation=relation)
        .order_by()
        .values("lesson")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(rows, output_field=IntegerField()), Value(0))


def lesson_browse(
    *,
    workspace: Workspace,
    scope: str = "",
    project_digest: str = "",
    state: str = "",
    operation_key: str = "",
    q: str = "",
    changed: str = "",
    since: date | None = None,
) -> QuerySet[Lesson]:
    """Current lesson rows (one per lineage), filtered, each with its evidence counts.

    ``project_digest`` means that project's own lessons (not the global ones too);
    ``q`` matches the text or the operation, case-insensitively; ``changed`` ("learned"
    or "retired") with ``since`` is the dashboard's rule (``memory.lessons.changes``).
    """
    lessons = Lesson.objects.filter(workspace=workspace, superseded_by__isnull=True)
    if scope in LessonScope.values:
        lessons = lessons.filter(scope=scope)
    if project_digest:
        lessons = lessons.filter(scope=LessonScope.PROJECT, project_digest=project_digest)
    if state in LessonState.values:
        lessons = lessons.filter(state=state)
    if operation_key:
        lessons = lessons.filter(operation_key=operation_key)
    if q:
        lessons = lessons.filter(Q(text__icontains=q) | Q(operation_key__icontains=q))
    if changed in CHANGES and since is not None:
        lessons = lessons.filter(lesson_change_q(workspace=workspace, change=changed, since=since))
    return lessons.annotate(
        evidence_count=_evidence_count(LessonEvidence.Relation.SUPPORTS),
        contradiction_count=_evidence_count(LessonEvidence.Relation.CONTRADICTS),
    )


def lesson_projects(*, workspace: Workspace) -> list[str]:
    """Digests of the projects that have current lessons (for the filter; bounded)."""
    return list(
        Lesson.objects.filter(
            workspace=workspace, superseded_by__isnull=True, scope=LessonScope.PROJECT
        )
        .order_by("project_digest")
        .values_list("project_digest", flat=True)
        .distinct()[: settings.CAIRN_UI_PROJECTS_MAX]
    )


def lesson_lineage_activity(*, workspace: Workspace, lesson_ids: list[int]) -> list[AuditEvent]:
    """What people, agents and jobs did to these rows, newest first (bounded)."""
    return audit_event_for_targets(workspace=workspace, target_type="lesson", target_ids=lesson_ids)


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
    channel: str = "",
) -> QuerySet[Outcome]:
    """Newest first, one row per turn. ``passed`` is ``yes``, ``no``, ``unverified`` or '';
    ``channel`` (harness, agent, person) keeps the turns reported through it.

    The big JSON columns stay in the database: the list shows their lengths only.
    """
    qs = Outcome.objects.filter(workspace=workspace)
    if agent_id:
        qs = qs.filter(agent_id=agent_id)
    if session_id:
        qs = qs.filter(session_id=session_id)
    if project_digest:
        qs = qs.filter(project_digest=project_digest)
    if channel:
        qs = qs.filter(channel=channel)
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
