"""Reads behind the review UI: the re-anchor rule, queue counts and the learning KPIs."""

import pytest

from memory.core.actors import Actor
from memory.models import SkillDelta
from memory.skills.consent import delta_reject
from memory.skills.selectors import delta_queue_counts, delta_reanchor_check, skill_kpis
from tests.factories.identity import WorkspaceFactory
from tests.factories.skills import (
    OBSERVED_CONTENT,
    bulk_deltas,
    learning_agent,
    propose,
    register_v2,
    reviewer,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(workspace):
    return learning_agent(workspace)


def test_the_reanchor_check_predicts_what_reapproval_does(agent, workspace):
    same = propose(agent, "Sign with a first name.", section="drafting-replies")
    stale = propose(agent, "Escalate sooner.", section="escalation")
    gone = propose(agent, "Newest first.", section="triage-inbox")
    staged = propose(agent, "Stays staged.", section="drafting-replies")
    v2 = (
        "\n## Escalation\nEscalate a thread after one business day.\n\n"
        "## Drafting replies\nKeep replies short and polite.\n"
    )
    register_v2(workspace, body=v2)
    propose(agent, "Fresh on v2.", section="escalation")  # staged on v2, not orphaned
    rows = {d.pk: d for d in SkillDelta.objects.select_related("skill__current_version")}
    version = rows[same.pk].skill.current_version
    assert delta_reanchor_check(delta=rows[same.pk], version=version) == {
        "refusal": None,
        "stale": False,
    }
    assert delta_reanchor_check(delta=rows[stale.pk], version=version) == {
        "refusal": None,
        "stale": True,
    }
    assert (
        delta_reanchor_check(delta=rows[gone.pk], version=version)["refusal"][0] == "section_gone"
    )
    delta_reject(delta=rows[staged.pk], actor=Actor.for_user(reviewer(workspace)), reason="no")
    archived = SkillDelta.objects.get(pk=staged.pk)
    assert (
        delta_reanchor_check(delta=archived, version=version)["refusal"][0] == "invalid_transition"
    )


def test_queue_counts_are_per_workspace_and_per_queue(agent, workspace):
    propose(agent)
    propose(agent, "x", provenance=OBSERVED_CONTENT)
    bulk_deltas(agent, 3, status="orphaned")
    bulk_deltas(agent, 2, status="active", approved_by="user:x")
    bulk_deltas(learning_agent(WorkspaceFactory()), 4)
    assert delta_queue_counts(workspace=workspace) == {"staged": 1, "quarantined": 1, "orphaned": 3}


def test_kpis_count_approvals_below_the_evidence_bar(agent, workspace):
    common = {"status": "active", "provenance_source": "outcome_evidence", "approved_by": "user:x"}
    bulk_deltas(agent, 1, approval_samples=5, approval_positive=5, **common)
    bulk_deltas(agent, 2, approval_samples=5, approval_positive=4, **common)  # 80% < 85%
    bulk_deltas(agent, 1, approval_samples=3, approval_positive=3, **common)  # too few
    bulk_deltas(agent, 1, approval_samples=20, approval_positive=17, **common)  # exactly 85%
    bulk_deltas(agent, 1, approval_samples=5, approval_positive=4, status="archived")
    kpis = skill_kpis(workspace=workspace)
    assert kpis["activations_below_threshold"] == 3
    assert kpis["deltas_by_tier_status"] == {"3": {"active": 5, "archived": 1}}
    assert kpis["learnings"] == 5 and kpis["tier01_share"] == 0.0
