"""A planted workspace for the maintenance jobs: a contradiction between agents, one
touching a person's item, a duplicate and a bystander."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from memory.models import Knowledge
from tests.factories.knowledge import KnowledgeFactory

OLD_PG = "The staging server runs PostgreSQL 14"
NEW_PG = "The staging server runs PostgreSQL 16"
PERSON = "The nightly backup job writes to bucket cairn-backups"
AGENT_VS_PERSON = "The nightly backup job does not write to bucket cairn-backups"
DUP_STRONG = "Deploys to production go through the release pipeline"
DUP_WEAK = "Deploys to production go through the release pipeline."
BYSTANDER = "The office coffee machine is broken"


def aged(item: Knowledge, days: float) -> Knowledge:
    Knowledge.objects.filter(pk=item.pk).update(created_at=timezone.now() - timedelta(days=days))
    item.refresh_from_db()
    return item


def plant(workspace) -> dict[str, Knowledge]:
    make = KnowledgeFactory
    return {
        "old_pg": aged(make(workspace=workspace, content=OLD_PG, confidence=0.6), 3),
        "new_pg": aged(make(workspace=workspace, content=NEW_PG, confidence=0.5), 1),
        "person": aged(make(workspace=workspace, content=PERSON, source="user"), 5),
        "agent_vs_person": aged(make(workspace=workspace, content=AGENT_VS_PERSON), 2),
        "dup_strong": aged(make(workspace=workspace, content=DUP_STRONG, confidence=0.7), 4),
        "dup_weak": aged(make(workspace=workspace, content=DUP_WEAK, confidence=0.5), 1),
        "bystander": make(workspace=workspace, content=BYSTANDER),
    }


def state(workspace) -> dict:
    """What a reconcile run leaves, by content (ids differ between workspaces)."""
    rows = Knowledge.objects.filter(workspace=workspace)
    by_id = {k.pk: k.content for k in rows}
    return {
        "live": sorted(k.content for k in rows if k.superseded_by_id is None),
        "superseded": sorted(
            (k.content, by_id[k.superseded_by_id]) for k in rows if k.superseded_by_id
        ),
        "confidence": sorted((k.content, round(k.confidence, 6)) for k in rows),
        "reviews": sorted(
            tuple(sorted((by_id[r.a_id], by_id[r.b_id])))
            for r in workspace.review_items.filter(status="open")
        ),
        "decisions": sorted(
            (by_id[d.a_id], by_id[d.b_id], d.verdict, d.action)
            for d in workspace.pair_decisions.all()
        ),
    }
