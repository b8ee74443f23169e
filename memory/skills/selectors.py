"""Reads for skills, deltas, facts and the trust ledger (SPEC section 6)."""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.db.models import CharField, Count, Exists, F, OuterRef, Prefetch, Q, Subquery, Value
from django.db.models.functions import Cast, Coalesce

from cairn.errors import NotFoundError
from memory.models import (
    Agent,
    AgentTool,
    AuditEvent,
    DeltaKind,
    DeltaStatus,
    LearnedFact,
    OrphanNotice,
    ProvenanceSource,
    Skill,
    SkillDelta,
    SkillVersion,
    Workspace,
)
from memory.skills.skillmd import local_capabilities


def skill_get(*, workspace: Workspace, name: str) -> Skill:
    skill = (
        Skill.objects.select_related("current_version")
        .filter(workspace=workspace, name=name)
        .first()
    )
    if skill is None:
        raise NotFoundError(f"No skill named {name!r} in this workspace.")
    return skill


def delta_list(*, agent: Agent, skill: Skill):
    """This agent's deltas on ``skill``, oldest first, in a fixed number of queries."""
    return (
        SkillDelta.objects.filter(workspace=agent.workspace, agent=agent, skill=skill)
        .select_related("anchor_version")
        .prefetch_related(Prefetch("members", queryset=SkillDelta.objects.only("id")))
        .defer("trigger_embedding", "payload_embedding")
        .order_by("created_at", "id")
    )


def delta_get(*, workspace: Workspace, delta_id: int) -> SkillDelta:
    delta = (
        SkillDelta.objects.select_related("skill", "agent", "anchor_version")
        .filter(workspace=workspace, pk=delta_id)
        .first()
    )
    if delta is None:
        raise NotFoundError("No such delta.")
    return delta


def agent_tool_list(*, agent: Agent) -> list[AgentTool]:
    return list(
        AgentTool.objects.filter(workspace_id=agent.workspace_id, agent=agent).order_by("name")
    )


# --------------------------------------------------------------------------- trust ledger


# --------------------------------------------------------------------------- effective skill


# --------------------------------------------------------------------------- facts


def fact_consumers(*, workspace: Workspace, namespaces: list[str]) -> dict[str, list[dict]]:
    """{namespace: [{agent, tool}]}: tools in this workspace that declare they read it."""
    consumers: dict[str, list[dict]] = {ns: [] for ns in namespaces}
    tools = (
        AgentTool.objects.filter(workspace=workspace)
        .exclude(reads_facts=[])
        .select_related("agent")
        .order_by("agent__name", "name")
    )
    for tool in tools:
        for ns in tool.reads_facts:
            if ns in consumers:
                consumers[ns].append({"agent": tool.agent.name, "tool": tool.name})
    return consumers


def fact_get(*, workspace: Workspace, namespace: str, key: str) -> LearnedFact:
    fact = LearnedFact.objects.filter(
        workspace=workspace, namespace=namespace, key=key, superseded_by__isnull=True
    ).first()
    if fact is None:
        raise NotFoundError(f"No fact {namespace}/{key} in this workspace.")
    return fact


def fact_list(*, workspace: Workspace, namespace: str) -> list[LearnedFact]:
    return list(
        LearnedFact.objects.filter(
            workspace=workspace, namespace=namespace, superseded_by__isnull=True
        ).order_by("key")
    )


# --------------------------------------------------------------------------- rebase


def delta_reanchor_check(*, delta: SkillDelta, version: SkillVersion) -> dict:
    """Whether orphan ``delta`` can be re-approved onto ``version``, and if it is stale.

    The one statement of the rule: ``delta_reapprove`` applies it, the orphans
    screen previews it. ``{"refusal": (code, message) | None, "stale": bool}``;
    a delta is stale when its section's text changed since it was anchored.
    """
    if delta.status != DeltaStatus.ORPHANED:
        return {
            "refusal": ("invalid_transition", f"delta is {delta.status}, not orphaned"),
            "stale": delta.stale,
        }
    if local_capabilities(version.permissions):
        return {
            "refusal": (
                "local_capability_skill",
                "the skill now has a local-capability permission",
            ),
            "stale": delta.stale,
        }
    section = version.section(delta.anchor_section)
    if section is None:
        return {
            "refusal": (
                "section_gone",
                f"section {delta.anchor_section!r} no longer exists in {version.version}",
            ),
            "stale": delta.stale,
        }
    return {"refusal": None, "stale": delta.stale or section["digest"] != delta.anchor_digest}


# --------------------------------------------------------------------------- review surfaces


def orphan_notice_get(*, workspace: Workspace, pk) -> OrphanNotice | None:
    return (
        OrphanNotice.objects.select_related("skill", "version", "workspace")
        .filter(workspace=workspace, pk=pk)
        .first()
    )


def _orphans_remain():
    """A notice is still open while its skill has orphans: handling them all closes it."""
    return Exists(
        SkillDelta.objects.filter(
            workspace_id=OuterRef("workspace_id"),
            skill_id=OuterRef("skill_id"),
            status=DeltaStatus.ORPHANED,
        )
    )


def orphan_notice_list(*, workspace: Workspace, unseen_only: bool = True):
    """Notices of skill updates that orphaned deltas; by default the open ones only.

    Open: not dismissed, and the skill still has orphans (re-approving or
    discarding the last one closes the notice without a click).
    """
    qs = (
        OrphanNotice.objects.filter(workspace=workspace)
        .select_related("skill", "version")
        # ``count`` is how many the update orphaned; ``remaining``, how many still wait
        # (a banner saying 3 after two were re-approved reads as if nothing happened).
        .annotate(
            remaining=Coalesce(
                Subquery(
                    SkillDelta.objects.filter(
                        workspace_id=OuterRef("workspace_id"),
                        skill_id=OuterRef("skill_id"),
                        status=DeltaStatus.ORPHANED,
                    )
                    .order_by()
                    .values("skill_id")
                    .annotate(n=Count("pk"))
                    .values("n")
                ),
                Value(0),
            )
        )
    )
    if unseen_only:
        qs = qs.filter(seen_at__isnull=True).filter(_orphans_remain())
    return qs.order_by("-created_at", "-id")


def skill_kpis(*, workspace: Workspace) -> dict:
    """Learning KPIs for the UI (seed 002's implementation-level KPIs).

    - deltas by tier and status;
    - tier discipline: share of live learnings held at tier 0/1 (current facts +
      tool-hints) among all live learnings (facts + non-archived deltas);
    - promotion precision: active outcome_evidence deltas approved below the
      evidence bar (must be 0), and active untrusted deltas nobody confirmed (must be 0);
    - orphans pending review and unseen orphan notices.
    """
    min_samples, threshold = settings.CAIRN_TRUST_MIN_SAMPLES, settings.CAIRN_TRUST_THRESHOLD
    # One grouped pass over the deltas; the KPIs below are sums over its rows.
    below_bar = Q(provenance_source=ProvenanceSource.OUTCOME_EVIDENCE) & (
        Q(approval_samples__isnull=True)
        | Q(approval_samples__lt=min_samples)
        | Q(approval_positive__isnull=True)
        | Q(approval_positive__lt=F("approval_samples") * threshold)
    )
    rows = list(
        SkillDelta.objects.filter(workspace=workspace)
        .values("tier", "status")
        .annotate(
            n=Count("id"),
            hints=Count("id", filter=Q(kind=DeltaKind.TOOL_HINT)),
            below_bar=Count("id", filter=below_bar),
            unconfirmed=Count("id", filter=Q(trust="untrusted", approved_by__startswith="system:")),
        )
        .order_by("tier", "status")
    )
    by_tier_status: dict[str, dict[str, int]] = {}
    for row in rows:
        by_tier_status.setdefault(str(row["tier"]), {})[row["status"]] = row["n"]
    live = [row for row in rows if row["status"] != DeltaStatus.ARCHIVED]
    active = [row for row in rows if row["status"] == DeltaStatus.ACTIVE]
    facts = LearnedFact.objects.filter(workspace=workspace, superseded_by__isnull=True).count()
    tool_hints = sum(row["hints"] for row in live)
    total = facts + sum(row["n"] for row in live)
    return {
        "deltas_by_tier_status": by_tier_status,
        "facts": facts,
        "tier01_learnings": facts + tool_hints,
        "learnings": total,
        "tier01_share": round((facts + tool_hints) / total, 4) if total else None,
        "activations_below_threshold": sum(row["below_bar"] for row in active),
        "untrusted_active_unconfirmed": sum(row["unconfirmed"] for row in active),
        "orphans_pending": sum(r["n"] for r in rows if r["status"] == DeltaStatus.ORPHANED),
        "orphan_notices_unseen": OrphanNotice.objects.filter(
            _orphans_remain(), workspace=workspace, seen_at__isnull=True
        ).count(),
    }


# --------------------------------------------------------------------------- review queues

REVIEW_QUEUES = (DeltaStatus.STAGED, DeltaStatus.QUARANTINED, DeltaStatus.ORPHANED)
# Oldest first: a queue is worked in the order proposals arrived.
DELTA_QUEUE_ORDER = ("created_at", "id")
# Orphans are grouped by skill, then by the version they were anchored to.
ORPHAN_ORDER = ("skill_id", "anchor_version_id", "id")
SKILL_ORDER = ("name", "id")
FACT_ORDER = ("namespace", "key", "id")


def delta_queue_counts(*, workspace: Workspace) -> dict[str, int]:
    """{status: count} for the three review queues, in one query."""
    rows = (
        SkillDelta.objects.filter(workspace=workspace, status__in=REVIEW_QUEUES)
        .values("status")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts = dict.fromkeys(REVIEW_QUEUES, 0)
    counts.update({row["status"]: row["n"] for row in rows})
    return {str(status): n for status, n in counts.items()}


def _review_rows(*, workspace: Workspace):
    return (
        SkillDelta.objects.filter(workspace=workspace)
        .select_related("skill", "skill__current_version", "agent", "anchor_version")
        .defer(
            "trigger_embedding",
            "payload_embedding",
            "anchor_version__skill_md",
            "anchor_version__body",
            "skill__current_version__skill_md",
        )
        .prefetch_related(Prefetch("members", queryset=SkillDelta.objects.only("id", "status")))
    )


def delta_review_list(
    *,
    workspace: Workspace,
    status: str,
    skill_name: str = "",
    agent_id: int | None = None,
    kind: str = "",
):
    """Deltas in one review queue with what their cards show, in a fixed number of queries."""
    qs = _review_rows(workspace=workspace).filter(status=status)
    if skill_name:
        qs = qs.filter(skill__name=skill_name)
    if agent_id is not None:
        qs = qs.filter(agent_id=agent_id)
    if kind:
        qs = qs.filter(kind=kind)
    return qs


def delta_queue_facets(*, workspace: Workspace, status: str) -> dict:
    """The skills and agents with deltas in one queue, with counts, for its filters."""
    rows = (
        SkillDelta.objects.filter(workspace=workspace, status=status)
        .values("skill__name", "agent_id", "agent__name")
        .annotate(n=Count("id"))
        .order_by()
    )
    skills: dict[str, int] = {}
    agents: dict[tuple[str, int], int] = {}
    for row in rows:  # one query: (skill, agent) pairs, summed both ways
        skills[row["skill__name"]] = skills.get(row["skill__name"], 0) + row["n"]
        key = (row["agent__name"], row["agent_id"])
        agents[key] = agents.get(key, 0) + row["n"]
    return {
        "skills": [{"name": name, "n": n} for name, n in sorted(skills.items())],
        "agents": [{"id": pk, "name": name, "n": n} for (name, pk), n in sorted(agents.items())],
    }


# --------------------------------------------------------------------------- decisions

# What a person (or the auto-approve setting) decided about a pending delta, by the
# queue it left; the audit record's ``details["from"]`` says which queue that was.
DECISION_ACTIONS = {
    "delta.approve": "approved",
    "delta.auto_approve": "approved automatically",
    "delta.confirm_quarantined": "confirmed",
    "delta.reapprove": "re-approved",
    "delta.reject": "rejected",
}
DECISION_ORDER = ("-created_at", "-id")


def delta_decision_list(
    *,
    workspace: Workspace,
    status: str,
    decision: str = "",
    actor: str = "",
    skill_name: str = "",
    agent_id: int | None = None,
):
    """Decisions on deltas that left the ``status`` queue, newest first (audit events).

    ``decision`` is ``approved`` (any activation) or ``rejected``; ``actor`` matches
    as a prefix (``user:``). Deltas are attached by ``delta_decision_attach``.
    """
    actions = list(DECISION_ACTIONS)
    if decision == "rejected":
        actions = ["delta.reject"]
    elif decision == "approved":
        actions = [a for a in actions if a != "delta.reject"]
    qs = AuditEvent.objects.filter(
        workspace=workspace, target_type="skill_delta", action__in=actions, details__from=status
    )
    if actor:
        qs = qs.filter(actor__startswith=actor)
    if skill_name or agent_id is not None:
        deltas = SkillDelta.objects.filter(workspace=workspace)
        if skill_name:
            deltas = deltas.filter(skill__name=skill_name)
        if agent_id is not None:
            deltas = deltas.filter(agent_id=agent_id)
        ids = deltas.annotate(key=Cast("id", CharField())).values("key")
        qs = qs.filter(target_id__in=ids)
    return qs


def delta_decision_attach(*, workspace: Workspace, events: list) -> list:
    """Give each decision event its ``delta`` (or None once erased) and a ``decision`` label."""
    ids = {int(e.target_id) for e in events if e.target_id.isdigit()}
    deltas = {d.pk: d for d in _review_rows(workspace=workspace).filter(pk__in=ids)}
    for event in events:
        event.delta = deltas.get(int(event.target_id)) if event.target_id.isdigit() else None
        event.decision = DECISION_ACTIONS.get(event.action, event.action)
    return events


def delta_history(*, delta: SkillDelta, limit: int | None = None) -> list[AuditEvent]:
    """Everything recorded about ``delta``, oldest first: created, scanned, decided, orphaned…"""
    limit = limit or settings.CAIRN_UI_LESSON_ACTIVITY_MAX
    return list(
        AuditEvent.objects.filter(
            workspace_id=delta.workspace_id, target_type="skill_delta", target_id=str(delta.pk)
        ).order_by("created_at", "id")[:limit]
    )


def delta_review_get(*, workspace: Workspace, pk) -> SkillDelta | None:
    """One delta of ``workspace`` as the review cards need it; None for other workspaces' ids."""
    return _review_rows(workspace=workspace).filter(pk=pk).first()


def skill_review_list(*, workspace: Workspace):
    """Skills of ``workspace`` with their current version and delta counts by status."""
    counts = {
        f"n_{status}": Count("deltas", filter=Q(deltas__status=status))
        for status in DeltaStatus.values
    }
    return (
        Skill.objects.filter(workspace=workspace)
        .select_related("current_version")
        .defer("current_version__skill_md", "current_version__body")
        .annotate(**counts)
    )


def skill_review_get(*, workspace: Workspace, name: str) -> Skill | None:
    """One skill with its delta counts and its whole current version (text included)."""
    counts = {
        f"n_{status}": Count("deltas", filter=Q(deltas__status=status))
        for status in DeltaStatus.values
    }
    return (
        Skill.objects.filter(workspace=workspace, name=name)
        .select_related("current_version")
        .annotate(**counts)
        .first()
    )


def skill_agent_get(*, workspace: Workspace, pk: int) -> Agent | None:
    """An agent of ``workspace`` (with its workspace loaded) whose effective skill to show."""
    return Agent.objects.select_related("workspace").filter(workspace=workspace, pk=pk).first()


def skill_version_bodies(*, workspace: Workspace, ids) -> dict[int, str]:
    """{version id: body} for versions of ``workspace``'s skills, in one query."""
    rows = SkillVersion.objects.filter(skill__workspace=workspace, pk__in=set(ids))
    return dict(rows.values_list("id", "body"))


def skill_version_list(*, skill: Skill, limit: int) -> tuple[list[SkillVersion], int]:
    """The newest ``limit`` versions of ``skill`` (without their text) and how many exist."""
    versions = list(
        SkillVersion.objects.filter(skill=skill)
        .defer("skill_md", "body")
        .order_by("-created_at", "-id")[:limit]
    )
    total = len(versions)
    if total == limit:
        total = SkillVersion.objects.filter(skill=skill).count()
    return versions, total


def skill_agent_list(*, skill: Skill) -> list[dict]:
    """Agents with deltas on ``skill``: [{id, name, <status>: n}] by name, in one query."""
    counts = {str(status): Count("id", filter=Q(status=status)) for status in DeltaStatus.values}
    rows = (
        SkillDelta.objects.filter(workspace_id=skill.workspace_id, skill=skill)
        .values("agent_id", "agent__name")
        .annotate(**counts)
        .order_by("agent__name", "agent_id")
    )
    return [{"id": r.pop("agent_id"), "name": r.pop("agent__name"), **r} for r in rows]


def fact_review_list(*, workspace: Workspace, namespace: str = ""):
    """Current (not superseded) facts of ``workspace``, optionally in one namespace."""
    qs = LearnedFact.objects.filter(workspace=workspace, superseded_by__isnull=True).select_related(
        "agent"
    )
    if namespace:
        qs = qs.filter(namespace=namespace)
    return qs


def fact_namespace_list(*, workspace: Workspace) -> list[str]:
    return list(
        LearnedFact.objects.filter(workspace=workspace, superseded_by__isnull=True)
        .values_list("namespace", flat=True)
        .distinct()
        .order_by("namespace")
    )


def delta_skill_names(*, workspace: Workspace, ids: Iterable[int]) -> dict[int, str]:
    """``{delta id: skill name}`` for the given deltas of this workspace (one query; none
    when ``ids`` is empty)."""
    wanted = sorted({i for i in ids if i})
    if not wanted:
        return {}
    return dict(
        SkillDelta.objects.filter(workspace=workspace, pk__in=wanted).values_list(
            "pk", "skill__name"
        )
    )
