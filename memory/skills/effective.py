"""The effective skill: the base SKILL.md with the active learned deltas
composed in (goal-matched, deterministic), its previews, and its per-session cache."""

from __future__ import annotations

import hashlib
import logging

from django.conf import settings
from django.core.cache import cache
from pgvector.django import CosineDistance
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from cairn.errors import NotFoundError
from memory.core.embedders import EmbeddingError
from memory.core.embeddings import get_embedder
from memory.core.text import sha256_text
from memory.core.validation import check_json_strings
from memory.models import (
    Agent,
    AgentTool,
    DeltaKind,
    DeltaStatus,
    ProvenanceSource,
    Skill,
    SkillDelta,
    SkillVersion,
    Workspace,
)
from memory.skills.registry import delta_usage_record
from memory.skills.selectors import delta_reanchor_check, skill_get
from memory.skills.skillmd import (
    WHOLE_BODY_SLUG,
    delta_line,
    local_capabilities,
)
from memory.skills.trust import trust_progress_many

logger = logging.getLogger(__name__)


def _cache_key(*, agent: Agent, skill: Skill, session_id: str) -> str:
    session = hashlib.sha256(session_id.encode()).hexdigest()[:32]
    return f"skills:effective:v1:{agent.workspace_id}:{agent.pk}:{skill.pk}:{session}"


def effective_skill_cache_forget(*, workspace_id: int, agent_ids: list[int] | None = None) -> int:
    """Delete cached effective skills (of ``agent_ids``, else of the whole workspace).

    Erasure calls this: a cached rendering quotes delta payloads. Returns how many
    keys went. Keys are found with SCAN on the cache's own Redis, never KEYS.
    """
    if agent_ids is not None and not agent_ids:
        return 0
    patterns = (
        [f"skills:effective:v1:{workspace_id}:{agent_id}:*" for agent_id in agent_ids]
        if agent_ids is not None
        else [f"skills:effective:v1:{workspace_id}:*"]
    )
    client = cache._cache.get_client(write=True)
    deleted = 0
    for pattern in patterns:
        batch = []
        for key in client.scan_iter(match=cache.make_key(pattern), count=500):
            batch.append(key)
            if len(batch) >= 500:
                deleted += client.delete(*batch)
                batch = []
        if batch:
            deleted += client.delete(*batch)
    return deleted


def effective_skill_resolve(
    *,
    agent: Agent,
    skill_name: str,
    session_id: str = "",
    learned: bool = True,
    goal: str = "",
    record: bool = True,
) -> dict:
    """The effective skill for ``agent``: base ⊕ its active deltas.

    1. ``learned=False`` short-circuits before any delta is read: the base alone.
    2. With a ``session_id``, the first resolution is cached for the session
       (Django cache, i.e. Redis) and returned unchanged afterwards, so a delta
       approved mid-session applies from the next session.
    3. Deltas rendered by a fresh resolution have their use recorded.

    ``record=False`` (an incognito read): neither the deltas' use nor the session's
    resolution is recorded (a cached one is still answered).
    """

    check_json_strings("session_id", [session_id, goal])
    skill = skill_get(workspace=agent.workspace, name=skill_name)
    if skill.current_version is None:
        raise NotFoundError(f"Skill {skill_name!r} has no registered version.")
    if not learned:
        return {**effective_skill_build(agent=agent, skill=skill, learned=False), "cached": False}
    key = _cache_key(agent=agent, skill=skill, session_id=session_id) if session_id else None
    if key:
        hit = _cache_call(cache.get, key)
        if hit is not None:
            return {**hit, "cached": True}
    built = effective_skill_build(agent=agent, skill=skill, learned=True, goal=goal)
    if not record:
        return {**built, "cached": False}
    delta_usage_record(delta_ids=[entry["id"] for entry in built["applied"]])
    if key:
        _cache_call(cache.set, key, built, timeout=settings.CAIRN_SKILL_SESSION_CACHE_S)
    return {**built, "cached": False}


def _cache_call(method, *args, **kwargs):
    """The session cache is an optimisation: when it is down, resolve without it."""
    try:
        return method(*args, **kwargs)
    except (RedisConnectionError, RedisTimeoutError) as exc:
        logger.warning("effective-skill cache unavailable, serving uncached: %s", exc)
        return None


LEARNED_HEADING = "## Learned adjustments"


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
