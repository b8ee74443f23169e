"""Reads for skills, deltas, facts and the trust ledger (SPEC section 6)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db.models import Count, F, Prefetch, Q
from pgvector.django import CosineDistance

from cairn.errors import NotFoundError
from memory.embeddings import EmbeddingError, get_embedder
from memory.models import (
    Agent,
    AgentTool,
    DeltaKind,
    DeltaStatus,
    FeedbackSample,
    LearnedFact,
    OrphanNotice,
    ProvenanceSource,
    Skill,
    SkillDelta,
    SkillVersion,
    Workspace,
)
from memory.services.skills import (
    WHOLE_BODY_SLUG,
    delta_line,
    local_capabilities,
    sha256_text,
)

logger = logging.getLogger(__name__)

LEARNED_HEADING = "## Learned adjustments"


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
    return list(AgentTool.objects.filter(agent=agent).order_by("name"))


# --------------------------------------------------------------------------- trust ledger


def _trust_progress(*, scope: str, samples: int, positive: int) -> dict:
    """The one reading of the ledger bar: at least N samples at ≥ the threshold positive."""
    required, threshold = settings.CAIRN_TRUST_MIN_SAMPLES, settings.CAIRN_TRUST_THRESHOLD
    ratio = positive / samples if samples else 0.0
    met = samples >= required and ratio >= threshold
    if samples < required:
        message = f"{samples} of {required} samples on scope {scope!r}"
    else:
        message = (
            f"{samples} samples on scope {scope!r}, {ratio:.0%} positive (needs {threshold:.0%})"
        )
    return {
        "scope": scope,
        "samples": samples,
        "positive": positive,
        "ratio": round(ratio, 4),
        "required_samples": required,
        "required_ratio": threshold,
        "met": met,
        "message": message,
    }


def trust_progress_get(*, workspace: Workspace, scope: str) -> dict:
    """The trust ledger on ``scope``: samples, positives and whether the bar is met."""
    tally = FeedbackSample.objects.filter(workspace=workspace, scope=scope).aggregate(
        samples=Count("id"), positive=Count("id", filter=Q(positive=True))
    )
    return _trust_progress(scope=scope, samples=tally["samples"], positive=tally["positive"])


def trust_progress_many(*, workspace: Workspace, scopes) -> dict[str, dict]:
    """``trust_progress_get`` for several scopes in one query: {scope: progress}."""
    scopes = sorted(set(scopes))
    if not scopes:
        return {}
    rows = (
        FeedbackSample.objects.filter(workspace=workspace, scope__in=scopes)
        .values("scope")
        .annotate(samples=Count("id"), positive=Count("id", filter=Q(positive=True)))
        .order_by("scope")
    )
    tallies = {row["scope"]: (row["samples"], row["positive"]) for row in rows}
    return {
        scope: _trust_progress(
            scope=scope,
            samples=tallies.get(scope, (0, 0))[0],
            positive=tallies.get(scope, (0, 0))[1],
        )
        for scope in scopes
    }


def delta_trust_progress(*, delta: SkillDelta) -> dict:
    """Approval progress for the UI: the ledger bar for outcome_evidence, else not needed."""
    progress = trust_progress_get(workspace=delta.workspace, scope=delta.scope)
    progress["needed"] = delta.provenance_source == ProvenanceSource.OUTCOME_EVIDENCE
    return progress


# --------------------------------------------------------------------------- effective skill


def _canonical(delta: SkillDelta) -> tuple:
    return (delta.tier, delta.kind, delta.created_at, delta.id)


def _goal_matches(*, candidates: list[SkillDelta], goal: str) -> dict[int, float]:
    """{delta id: cosine similarity} for retrieval-only deltas whose trigger matches."""
    if not goal.strip() or not candidates:
        return {}
    try:
        vector = get_embedder().embed_one(goal)
    except EmbeddingError as exc:  # tier-3 retrieval goes dark; everything else still works
        logger.warning("goal embedding failed, no retrieval-only deltas rendered: %s", exc)
        return {}
    max_distance = 1.0 - settings.CAIRN_SKILL_RETRIEVAL_SIMILARITY + 1e-9
    rows = (
        SkillDelta.objects.filter(
            pk__in=[d.pk for d in candidates], trigger_embedding__isnull=False
        )
        .annotate(distance=CosineDistance("trigger_embedding", vector))
        .filter(distance__lte=max_distance)
        .values_list("id", "distance")
    )
    return {pk: 1.0 - distance for pk, distance in rows}


def effective_skill_build(
    *, agent: Agent, skill: Skill, learned: bool = True, goal: str = ""
) -> dict:
    """Base ⊕ active deltas, deterministic for the same state (no caching, no writes).

    1. ``learned=False``, or a skill with a local-capability permission, reads no
       delta at all: the base alone.
    2. Otherwise read the agent's active deltas on the current version, its tool
       registry (only if there are tool-hints) and which retrieval-only deltas
       match ``goal``, and compose them with ``effective_skill_compose``.
    """
    version = skill.current_version
    deltas: list[SkillDelta] = []
    registry: dict[str, AgentTool] = {}
    matches: dict[int, float] = {}
    if learned and not local_capabilities(version.permissions):
        deltas = list(
            SkillDelta.objects.filter(
                workspace=agent.workspace,
                agent=agent,
                skill=skill,
                status=DeltaStatus.ACTIVE,
                anchor_version=version,
            ).defer("trigger_embedding", "payload_embedding")
        )
        if any(d.kind == DeltaKind.TOOL_HINT for d in deltas):
            registry = {t.name: t for t in AgentTool.objects.filter(agent=agent)}
        matches = _goal_matches(
            candidates=[d for d in deltas if d.tier == 3 and d.retrieval_only], goal=goal
        )
    return effective_skill_compose(
        skill=skill, version=version, deltas=deltas, registry=registry, matches=matches
    )


def effective_skill_compose(
    *,
    skill: Skill,
    version: SkillVersion,
    deltas: list[SkillDelta],
    registry: dict[str, AgentTool],
    matches: dict[int, float] | None = None,
) -> dict:
    """Render base ⊕ ``deltas`` (taken as active) from rows already read; no queries.

    The review UI composes "with" and "without" a pending delta from the same
    rows, so its diffs show exactly what ``effective_skill_build`` would serve.

    1. The base body, unchanged, and the base tools. A skill with a
       local-capability permission stops here.
    2. Tool-hints (tier 1) change only ``skill_tools``: base tools, then preferred
       registry tools, minus drops (restrictive wins). Names absent from the
       agent's registry now, or now on the write path, are skipped.
    3. Tier-3 deltas: resident ones in (tier, kind, created_at, id) order, then
       retrieval-only ones in ``matches`` (best first), each kept whole if it
       fits the token budget, else listed in ``omitted``.
    4. The kept ones render, in canonical order, under their section's title in
       an appended ``## Learned adjustments`` block.
    """
    matches = matches or {}
    body = version.body
    result = {
        "name": skill.name,
        "version": version.version,
        "base_digest": sha256_text(body),
        "text": body,
        "digest": sha256_text(body),
        "skill_tools": list(version.tools),
        "applied": [],
        "stale": [],
        "omitted": [],
    }
    if local_capabilities(version.permissions):
        return result
    deltas = sorted(deltas, key=_canonical)
    if not deltas:
        return result
    applied: list[dict] = []

    hints = [d for d in deltas if d.kind == DeltaKind.TOOL_HINT]
    if hints:
        tools = list(version.tools)
        dropped: set[str] = set()
        for hint in hints:
            for name in hint.payload.get("prefer", []):
                tool = registry.get(name)
                if tool is not None and not tool.is_write_path and name not in tools:
                    tools.append(name)
            dropped.update(hint.payload.get("drop", []))
            applied.append(_applied(hint, "tool"))
        result["skill_tools"] = [name for name in tools if name not in dropped]

    prose = [d for d in deltas if d.tier == 3]
    resident = [d for d in prose if not d.retrieval_only]
    retrieved = sorted(
        (d for d in prose if d.retrieval_only and d.pk in matches),
        key=lambda d: (-matches[d.pk], d.pk),
    )
    budget = settings.CAIRN_SKILL_RESIDENT_TOKEN_BUDGET
    used = 0
    kept: list[tuple[SkillDelta, str]] = []
    for delta, via in [(d, "resident") for d in resident] + [(d, "retrieval") for d in retrieved]:
        if used + delta.tokens > budget:
            result["omitted"].append(delta.pk)
            continue
        used += delta.tokens
        kept.append((delta, via))
    kept.sort(key=lambda pair: _canonical(pair[0]))
    if kept:
        titles = {s["slug"]: s["title"] for s in version.sections}
        groups: dict[str, list[str]] = {}
        for delta, via in kept:
            groups.setdefault(delta.anchor_section, []).append(
                delta_line(kind=delta.kind, payload=delta.payload)
            )
            applied.append(_applied(delta, via))
        lines = [LEARNED_HEADING, ""]
        for slug, group in groups.items():
            title = titles.get(slug) or ("Whole skill" if slug == WHOLE_BODY_SLUG else slug)
            lines += [f"### {title}", *group, ""]
        separator = "\n" if body.endswith("\n") else "\n\n"
        text = body + separator + "\n".join(lines).rstrip("\n") + "\n"
        result["text"] = text
        result["digest"] = sha256_text(text)
    result["applied"] = sorted(applied, key=lambda a: (a["tier"], a["kind"], a["order"]))
    for entry in result["applied"]:
        entry.pop("order")
    result["stale"] = [a["id"] for a in result["applied"] if a["stale"]]
    return result


def _applied(delta: SkillDelta, via: str) -> dict:
    return {
        "id": delta.pk,
        "kind": delta.kind,
        "tier": delta.tier,
        "section": delta.anchor_section,
        "stale": delta.stale,
        "via": via,
        "order": (delta.created_at, delta.pk),
    }


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


def orphan_notice_list(*, workspace: Workspace, unseen_only: bool = True):
    qs = OrphanNotice.objects.filter(workspace=workspace).select_related("skill", "version")
    if unseen_only:
        qs = qs.filter(seen_at__isnull=True)
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
            workspace=workspace, seen_at__isnull=True
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
):
    """Deltas in one review queue with what their cards show, in a fixed number of queries."""
    qs = _review_rows(workspace=workspace).filter(status=status)
    if skill_name:
        qs = qs.filter(skill__name=skill_name)
    if agent_id is not None:
        qs = qs.filter(agent_id=agent_id)
    return qs


def delta_review_get(*, workspace: Workspace, pk) -> SkillDelta | None:
    """One delta of ``workspace`` as the review cards need it; None for other workspaces' ids."""
    return _review_rows(workspace=workspace).filter(pk=pk).first()


def delta_previews(*, workspace: Workspace, deltas: list[SkillDelta]) -> dict[int, dict]:
    """What each pending delta would change, for the review cards, in three queries.

    For each delta: the effective skill of its agent on the skill's current
    version ``without`` it (the active deltas) and ``with`` it (taken as active;
    an umbrella replaces its members), both from ``effective_skill_compose``,
    so a diff of the two is exactly what approving it changes. Also its trust
    ledger progress when approval needs evidence (outcome_evidence), and for
    orphans what re-approval onto the current version would do.

    1. One query for the active deltas of every (agent, skill) on the page.
    2. One for the tool registries of agents with tool-hints among them.
    3. One for the ledger tallies of the scopes that need evidence.
    """
    if not deltas:
        return {}
    if any(d.workspace_id != workspace.pk for d in deltas):
        raise ValueError("delta_previews: every delta must belong to the workspace")
    agent_ids = {d.agent_id for d in deltas}
    skill_ids = {d.skill_id for d in deltas}
    current = {d.skill_id: d.skill.current_version_id for d in deltas}
    active: dict[tuple[int, int], list[SkillDelta]] = {}
    for row in SkillDelta.objects.filter(
        workspace=workspace,
        status=DeltaStatus.ACTIVE,
        agent_id__in=agent_ids,
        skill_id__in=skill_ids,
    ).defer("trigger_embedding", "payload_embedding"):
        if row.anchor_version_id == current[row.skill_id]:
            active.setdefault((row.agent_id, row.skill_id), []).append(row)
    hinted = {d.agent_id for d in deltas if d.kind == DeltaKind.TOOL_HINT} | {
        agent_id
        for (agent_id, _), rows in active.items()
        if any(r.kind == DeltaKind.TOOL_HINT for r in rows)
    }
    registries: dict[int, dict[str, AgentTool]] = {pk: {} for pk in agent_ids}
    if hinted:
        for tool in AgentTool.objects.filter(agent_id__in=hinted):
            registries[tool.agent_id][tool.name] = tool
    evidence_scopes = [
        d.scope for d in deltas if d.provenance_source == ProvenanceSource.OUTCOME_EVIDENCE
    ]
    ledger = trust_progress_many(workspace=workspace, scopes=evidence_scopes)

    previews: dict[int, dict] = {}
    for delta in deltas:
        version = delta.skill.current_version
        members = {m.pk for m in delta.members.all()}
        others = [d for d in active.get((delta.agent_id, delta.skill_id), []) if d.pk != delta.pk]
        registry = registries[delta.agent_id]
        without = effective_skill_compose(
            skill=delta.skill, version=version, deltas=others, registry=registry
        )
        with_it = effective_skill_compose(
            skill=delta.skill,
            version=version,
            deltas=[d for d in others if d.pk not in members] + [delta],
            registry=registry,
        )
        progress = None
        if delta.provenance_source == ProvenanceSource.OUTCOME_EVIDENCE:
            progress = {**ledger[delta.scope], "needed": True}
        rebase = None
        if delta.status == DeltaStatus.ORPHANED:
            rebase = delta_reanchor_check(delta=delta, version=version)
        previews[delta.pk] = {
            "without": without,
            "with": with_it,
            "omitted": delta.pk in with_it["omitted"],
            "members": sorted(members),
            "trust": progress,
            "rebase": rebase,
        }
    return previews


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
