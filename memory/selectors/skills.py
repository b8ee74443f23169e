"""Reads for skills, deltas, facts and the trust ledger (SPEC section 6)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db.models import Count, Prefetch, Q
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


def trust_progress_get(*, workspace: Workspace, scope: str) -> dict:
    """The trust ledger on ``scope``: samples, positives and whether the bar is met."""
    tally = FeedbackSample.objects.filter(workspace=workspace, scope=scope).aggregate(
        samples=Count("id"), positive=Count("id", filter=Q(positive=True))
    )
    samples, positive = tally["samples"], tally["positive"]
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

    1. The base body, unchanged, and the base tools. ``learned=False``, or a skill
       with a local-capability permission, stops here before any delta is read.
    2. Tool-hints (tier 1) change only ``skill_tools``: base tools, then preferred
       registry tools, minus drops (restrictive wins). Names absent from the
       agent's registry now, or now on the write path, are skipped.
    3. Tier-3 deltas: resident ones in (tier, kind, created_at, id) order, then
       retrieval-only ones whose trigger matches ``goal`` (best first), each kept
       whole if it fits the token budget, else listed in ``omitted``.
    4. The kept ones render, in canonical order, under their section's title in
       an appended ``## Learned adjustments`` block.
    """
    version = skill.current_version
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
    if not learned or local_capabilities(version.permissions):
        return result
    deltas = sorted(
        SkillDelta.objects.filter(
            workspace=agent.workspace,
            agent=agent,
            skill=skill,
            status=DeltaStatus.ACTIVE,
            anchor_version=version,
        ).defer("trigger_embedding", "payload_embedding"),
        key=_canonical,
    )
    if not deltas:
        return result
    applied: list[dict] = []

    hints = [d for d in deltas if d.kind == DeltaKind.TOOL_HINT]
    if hints:
        registry = {t.name: t for t in AgentTool.objects.filter(agent=agent)}
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
    matches = _goal_matches(candidates=[d for d in prose if d.retrieval_only], goal=goal)
    retrieved = sorted((d for d in prose if d.pk in matches), key=lambda d: (-matches[d.pk], d.pk))
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


# --------------------------------------------------------------------------- review surfaces


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
    by_tier_status: dict[str, dict[str, int]] = {}
    rows = (
        SkillDelta.objects.filter(workspace=workspace)
        .values("tier", "status")
        .annotate(n=Count("id"))
        .order_by("tier", "status")
    )
    for row in rows:
        by_tier_status.setdefault(str(row["tier"]), {})[row["status"]] = row["n"]
    live = SkillDelta.objects.filter(workspace=workspace).exclude(status=DeltaStatus.ARCHIVED)
    facts = LearnedFact.objects.filter(workspace=workspace, superseded_by__isnull=True).count()
    tool_hints = live.filter(kind=DeltaKind.TOOL_HINT).count()
    total = facts + live.count()
    min_samples, threshold = settings.CAIRN_TRUST_MIN_SAMPLES, settings.CAIRN_TRUST_THRESHOLD
    below_threshold = 0
    for samples, positive in SkillDelta.objects.filter(
        workspace=workspace,
        status=DeltaStatus.ACTIVE,
        provenance_source=ProvenanceSource.OUTCOME_EVIDENCE,
    ).values_list("approval_samples", "approval_positive"):
        if not samples or samples < min_samples or positive / samples < threshold:
            below_threshold += 1
    return {
        "deltas_by_tier_status": by_tier_status,
        "facts": facts,
        "tier01_learnings": facts + tool_hints,
        "learnings": total,
        "tier01_share": round((facts + tool_hints) / total, 4) if total else None,
        "activations_below_threshold": below_threshold,
        "untrusted_active_unconfirmed": SkillDelta.objects.filter(
            workspace=workspace,
            status=DeltaStatus.ACTIVE,
            trust="untrusted",
            approved_by__startswith="system:",
        ).count(),
        "orphans_pending": live.filter(status=DeltaStatus.ORPHANED).count(),
        "orphan_notices_unseen": OrphanNotice.objects.filter(
            workspace=workspace, seen_at__isnull=True
        ).count(),
    }
