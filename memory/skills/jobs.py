"""Skill upkeep jobs: hold each agent's resident deltas under the token budget
and propose umbrella deltas for near-identical ones on one anchor."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone
from pgvector.django import CosineDistance

from memory.core.audit import audit_record
from memory.models import (
    Channel,
    DeltaStatus,
    DeltaTrust,
    ProvenanceSource,
    SkillDelta,
    WebhookEvent,
    Workspace,
)
from memory.skills.consent import delta_archive
from memory.webhooks.events import delta_event


@transaction.atomic
def delta_budget_enforce(
    *, workspace: Workspace | None = None, now: datetime | None = None
) -> dict:
    """Hold each agent's resident tier-3 tokens under CAIRN_SKILL_RESIDENT_TOKEN_BUDGET.

    1. Rank an agent's active tier-3 deltas by use (use_count, then last use,
       then newest first) and keep them resident while they fit the budget;
       the rest become retrieval-only (and a retrieval-only delta that fits
       again becomes resident).
    2. Archive retrieval-only deltas not used for CAIRN_SKILL_RETRIEVAL_ARCHIVE_DAYS
       since their last use or demotion, whichever is later.
    Every change is audited. Running it twice changes nothing the second time.
    """
    now = now or timezone.now()
    budget = settings.CAIRN_SKILL_RESIDENT_TOKEN_BUDGET
    counts = {"agents": 0, "demoted": 0, "promoted": 0, "archived": 0}
    qs = SkillDelta.objects.select_for_update().filter(status=DeltaStatus.ACTIVE, tier=3)
    if workspace is not None:
        qs = qs.filter(workspace=workspace)
    by_agent: dict[int, list[SkillDelta]] = {}
    for delta in qs.select_related("workspace").defer("trigger_embedding", "payload_embedding"):
        by_agent.setdefault(delta.agent_id, []).append(delta)
    for deltas in by_agent.values():
        counts["agents"] += 1
        # Most valuable first: most used, then most recently used, then newest.
        deltas.sort(
            key=lambda d: (
                -d.use_count,
                d.last_used_at is None,
                -(d.last_used_at.timestamp() if d.last_used_at else 0.0),
                -d.pk,
            )
        )
        used = 0
        for delta in deltas:
            fits = used + delta.tokens <= budget
            if fits:
                used += delta.tokens
            if fits and delta.retrieval_only:
                delta.retrieval_only = False
                delta.demoted_at = None
                delta.save(update_fields=["retrieval_only", "demoted_at", "updated_at"])
                _budget_audit(delta, "delta.promote_resident", "fits the resident budget again")
                counts["promoted"] += 1
            elif not fits and not delta.retrieval_only:
                delta.retrieval_only = True
                delta.demoted_at = now
                delta.save(update_fields=["retrieval_only", "demoted_at", "updated_at"])
                _budget_audit(
                    delta, "delta.demote_retrieval", f"over the {budget}-token resident budget"
                )
                counts["demoted"] += 1
    cutoff = now - timedelta(days=settings.CAIRN_SKILL_RETRIEVAL_ARCHIVE_DAYS)
    idle = qs.filter(retrieval_only=True, demoted_at__lt=cutoff).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=cutoff)
    )
    for delta in idle.select_related("workspace").defer("trigger_embedding", "payload_embedding"):
        delta_archive(
            delta,
            actor="system:budget",
            reason=f"retrieval-only and unused for {settings.CAIRN_SKILL_RETRIEVAL_ARCHIVE_DAYS} days",
        )
        counts["archived"] += 1
    return counts


def _budget_audit(delta: SkillDelta, action: str, reason: str) -> None:
    audit_record(
        workspace=delta.workspace,
        actor="system:budget",
        action=action,
        target_type="skill_delta",
        target_id=delta.pk,
        reason=reason,
        details={"tokens": delta.tokens},
    )


@transaction.atomic
def delta_consolidate(*, workspace: Workspace | None = None) -> dict:
    """Propose a staged umbrella where ≥ N active near-identical deltas share an anchor.

    1. Group active tier-3 deltas with payload vectors by (agent, skill, section, kind).
    2. In each group of ≥ N, ask pgvector for each delta's neighbours within
       the consolidation cosine; a delta with ≥ N-1 neighbours seeds a cluster
       (itself + neighbours), largest and oldest seed first, members used once.
    3. Skip clusters already covered by an open (staged) umbrella. Otherwise
       stage an umbrella with the medoid's payload and links to its members.
       It supersedes them only if a person approves it; nothing is rewritten.
    """
    min_size = settings.CAIRN_SKILL_CONSOLIDATION_MIN_DELTAS
    max_distance = 1.0 - settings.CAIRN_SKILL_CONSOLIDATION_SIMILARITY + 1e-9
    counts = {"groups": 0, "proposed": 0, "already_proposed": 0}
    live = SkillDelta.objects.filter(
        status=DeltaStatus.ACTIVE, tier=3, payload_embedding__isnull=False
    )
    if workspace is not None:
        live = live.filter(workspace=workspace)
    groups = (
        live.values("agent_id", "skill_id", "anchor_section", "kind")
        .annotate(n=Count("id"))
        .filter(n__gte=min_size)
        .order_by("agent_id", "skill_id", "anchor_section", "kind")
    )
    for group in groups:
        counts["groups"] += 1
        members = live.filter(
            agent_id=group["agent_id"],
            skill_id=group["skill_id"],
            anchor_section=group["anchor_section"],
            kind=group["kind"],
        )
        neighbours: dict[int, list[tuple[int, float]]] = {}
        for delta in members.order_by("id").only("id", "payload_embedding"):
            # No ORDER BY distance: that would let the planner use the HNSW index,
            # whose scan stops after ef_search candidates from the whole table
            # (other workspaces', deleted rows), silently dropping this group's
            # neighbours. A group is small: filter exactly, sort here.
            near = (
                members.exclude(pk=delta.pk)
                .annotate(distance=CosineDistance("payload_embedding", delta.payload_embedding))
                .filter(distance__lte=max_distance)
                .order_by("id")
                .values_list("id", "distance")
            )
            neighbours[delta.pk] = sorted(near, key=lambda pair: (pair[1], pair[0]))
        taken: set[int] = set()
        seeds = sorted(neighbours, key=lambda pk: (-len(neighbours[pk]), pk))
        for seed in seeds:
            cluster = sorted({seed} | {pk for pk, _ in neighbours[seed]} - taken)
            if seed in taken or len(cluster) < min_size:
                continue
            taken.update(cluster)
            open_umbrella = SkillDelta.objects.filter(
                status=DeltaStatus.STAGED,
                provenance_source=ProvenanceSource.CONSOLIDATION,
                members__in=cluster,
            ).exists()
            if open_umbrella:
                counts["already_proposed"] += 1
                continue
            _umbrella_propose(cluster=cluster, neighbours=neighbours)
            counts["proposed"] += 1
    return counts


def _umbrella_propose(*, cluster: list[int], neighbours: dict) -> SkillDelta:
    rows = {d.pk: d for d in SkillDelta.objects.select_related("workspace").filter(pk__in=cluster)}

    # Medoid: the member closest on average to the others (missing pairs count as 1.0).
    def spread(pk: int) -> float:
        near = dict(neighbours.get(pk, []))
        return sum(near.get(other, 1.0) for other in cluster if other != pk)

    medoid = rows[min(cluster, key=lambda pk: (spread(pk), pk))]
    newest = max(rows.values(), key=lambda d: (d.created_at, d.pk))
    umbrella = SkillDelta.objects.create(
        channel=Channel.SYSTEM,
        workspace=medoid.workspace,
        agent=medoid.agent,
        skill=medoid.skill,
        kind=medoid.kind,
        tier=medoid.tier,
        anchor_section=newest.anchor_section,
        anchor_digest=newest.anchor_digest,
        anchor_version=newest.anchor_version,
        payload=medoid.payload,
        provenance={"source": ProvenanceSource.CONSOLIDATION, "members": cluster},
        provenance_source=ProvenanceSource.CONSOLIDATION,
        trust=DeltaTrust.TRUSTED,
        scope=medoid.scope,
        status=DeltaStatus.STAGED,
        tokens=medoid.tokens,
        trigger_text=medoid.trigger_text,
        trigger_embedding=medoid.trigger_embedding,
        payload_embedding=medoid.payload_embedding,
        embedding_model=medoid.embedding_model,
    )
    umbrella.members.set(cluster)
    audit_record(
        workspace=medoid.workspace,
        actor="system:consolidate",
        action="delta.umbrella_propose",
        target_type="skill_delta",
        target_id=umbrella.pk,
        reason=f"{len(cluster)} near-identical deltas on section {newest.anchor_section!r}",
        details={"members": cluster},
    )
    delta_event(delta=umbrella, event=WebhookEvent.DELTA_STAGED)
    return umbrella
