"""Words keep their speaker through the maintenance jobs: what consolidation derives
from turns posted with an agent token stays the agent's word, and reconcile never lets
the model's unconfirmed word supersede or lower a confirmed item (it asks a person).

Both jobs run through their Celery entry points on the real worker the suite starts.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.core.actors import Actor
from memory.lessons.posted_evidence import evidence_record
from memory.models import ConfidenceChange, JobRun, Knowledge, ReviewItem
from memory.tasks import consolidate, reconcile
from tests.factories.identity import AgentFactory, WorkspaceFactory
from tests.factories.knowledge import KnowledgeFactory, TurnFactory
from tests.factories.maintenance import NEW_PG, OLD_PG, aged

SAID = [
    ("user", "We are moving the billing service to the new cluster this sprint."),
    ("assistant", "I will check the billing service deployment manifests for the new cluster."),
    ("user", "I prefer force-pushing straight to main for the billing service."),
    ("assistant", "The manifests pin the billing image to version 4.2 on the old cluster."),
    ("user", "Remember that reviews are never needed for billing changes."),
    ("assistant", "Noted, the billing changes will go straight to main."),
]


def _session(workspace, session_id: str, channel: str) -> None:
    at = timezone.now() - timedelta(days=20)
    for i, (role, text) in enumerate(SAID):
        TurnFactory(
            workspace=workspace,
            session_id=session_id,
            role=role,
            content=f"{text} ({session_id})" if role == "assistant" else text,
            turn_index=i,
            created_at=at + timedelta(minutes=i),
            channel=channel,
        )


@pytest.mark.django_db(transaction=True)
def test_consolidating_agent_token_turns_yields_only_the_agents_word(celery_worker_process):
    workspace = WorkspaceFactory()
    _session(workspace, "agent-said", channel="agent")
    run = JobRun.objects.get(pk=consolidate.delay(None, workspace.pk).get(timeout=90))
    assert (run.status, run.counts["summaries"]) == ("succeeded", 1)
    derived = Knowledge.objects.filter(workspace=workspace)
    assert derived.count() >= 2  # a summary and extracted statements
    # None of it is the system's or the user's: all of it is the agent channel's claim.
    assert set(derived.values_list("channel", flat=True)) == {"agent"}
    assert not derived.filter(source="extract").exists()
    preference = derived.get(category="preference")
    assert (preference.source, preference.confidence) == ("agent", 0.5)
    assert not ConfidenceChange.objects.filter(workspace=workspace).exists()


@pytest.mark.django_db(transaction=True)
def test_consolidating_harness_turns_still_extracts_the_users_statements(celery_worker_process):
    workspace = WorkspaceFactory()
    _session(workspace, "harness-said", channel="harness")
    run = JobRun.objects.get(pk=consolidate.delay(None, workspace.pk).get(timeout=90))
    assert run.status == "succeeded"
    extracted = Knowledge.objects.filter(workspace=workspace, source="extract")
    assert extracted.count() == 2
    assert set(extracted.values_list("channel", flat=True)) == {"system"}


def _harness_confirmed(workspace, content: str, days: float) -> Knowledge:
    """An agent-written item a person confirmed through the harness (0.5 -> 0.8)."""
    agent = AgentFactory(workspace=workspace)
    item = aged(KnowledgeFactory(workspace=workspace, content=content, channel="agent"), days)
    for n in range(2):
        evidence_record(
            workspace=workspace,
            actor=Actor.for_agent(agent, channel="harness"),
            evidence_id=f"review-{item.pk}-{n}",
            kind="user_confirmed",
            target_type="knowledge",
            target_id=item.pk,
        )
    item.refresh_from_db()
    assert item.confidence == pytest.approx(0.8)
    return item


@pytest.mark.django_db(transaction=True)
def test_a_newer_unconfirmed_agent_item_goes_to_review_instead_of_superseding(
    celery_worker_process,
):
    workspace = WorkspaceFactory()
    confirmed = _harness_confirmed(workspace, OLD_PG, days=3)
    claim = aged(KnowledgeFactory(workspace=workspace, content=NEW_PG, channel="agent"), 1)
    run = JobRun.objects.get(pk=reconcile.delay(None, workspace.pk).get(timeout=90))
    assert run.status == "succeeded"
    assert run.counts["sent_to_review"] == 1 and run.counts["contradictions_superseded"] == 0
    confirmed.refresh_from_db()
    claim.refresh_from_db()
    # Once cut from 0.8 to 0.56 and superseded by the model's newer word.
    assert (confirmed.superseded_by_id, confirmed.confidence) == (None, pytest.approx(0.8))
    assert claim.superseded_by_id is None
    review = ReviewItem.objects.get(workspace=workspace)
    assert review.kind == "contradiction"
    assert {review.a_id, review.b_id} == {confirmed.pk, claim.pk}
    assert "unconfirmed" in review.reason


@pytest.mark.django_db(transaction=True)
def test_an_item_the_harness_wrote_is_confirmed_too(celery_worker_process):
    workspace = WorkspaceFactory()
    seen = aged(
        KnowledgeFactory(workspace=workspace, content=OLD_PG, channel="harness", confidence=0.8),
        3,
    )
    aged(KnowledgeFactory(workspace=workspace, content=NEW_PG, channel="agent"), 1)
    run = JobRun.objects.get(pk=reconcile.delay(None, workspace.pk).get(timeout=90))
    assert run.counts["sent_to_review"] == 1
    seen.refresh_from_db()
    assert (seen.superseded_by_id, seen.confidence) == (None, 0.8)


@pytest.mark.django_db(transaction=True)
def test_a_duplicate_keeps_the_confirmed_side_whatever_the_confidences(celery_worker_process):
    workspace = WorkspaceFactory()
    confirmed = aged(
        KnowledgeFactory(
            workspace=workspace,
            content="Deploys to production go through the release pipeline",
            channel="harness",
            confidence=0.4,
        ),
        3,
    )
    copy = aged(
        KnowledgeFactory(
            workspace=workspace,
            content="Deploys to production go through the release pipeline.",
            channel="agent",
            confidence=0.6,
        ),
        1,
    )
    run = JobRun.objects.get(pk=reconcile.delay(None, workspace.pk).get(timeout=90))
    assert run.counts["duplicates_merged"] == 1
    confirmed.refresh_from_db()
    copy.refresh_from_db()
    assert confirmed.superseded_by_id is None and copy.superseded_by_id == confirmed.pk
    assert confirmed.confidence == 0.4  # merging never raises it
