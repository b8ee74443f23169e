"""Reads behind the review UI: a delta's preview equals what approving it serves."""

import pytest

from memory.core.actors import Actor
from memory.models import SkillDelta
from memory.skills.consent import delta_approve
from memory.skills.effective import delta_previews, effective_skill_build
from tests.factories.identity import WorkspaceFactory
from tests.factories.skills import (
    OUTCOME_EVIDENCE,
    harness_feedback,
    learning_agent,
    propose,
    reviewer,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(workspace):
    return learning_agent(workspace)


def _pending(workspace, *deltas):
    return list(
        SkillDelta.objects.select_related("skill", "skill__current_version", "agent")
        .prefetch_related("members")
        .filter(pk__in=[d.pk for d in deltas])
        .order_by("id")
    )


def test_the_preview_with_a_delta_is_what_approving_it_serves(agent, workspace):
    person = reviewer(workspace)
    delta_approve(
        delta=propose(agent, "Sign with a first name.", section="drafting-replies"),
        actor=Actor.for_user(person),
        reason="ok",
    )
    hint = propose(
        agent, kind="tool-hint", section="triage-inbox", payload={"prefer": ["pre_scan_inbox"]}
    )
    pref = propose(agent, "Escalate CFO mail after 48 hours.")
    before = effective_skill_build(agent=agent, skill=pref.skill)
    previews = delta_previews(workspace=workspace, deltas=_pending(workspace, hint, pref))
    for delta in (hint, pref):
        assert previews[delta.pk]["without"]["text"] == before["text"]
        assert previews[delta.pk]["without"]["skill_tools"] == before["skill_tools"]
    delta_approve(delta=pref, actor=Actor.for_user(person), reason="ok")
    after = effective_skill_build(agent=agent, skill=pref.skill)
    assert previews[pref.pk]["with"]["digest"] == after["digest"]
    assert previews[pref.pk]["with"]["text"] == after["text"]
    delta_approve(delta=hint, actor=Actor.for_user(person), reason="ok")
    both = effective_skill_build(agent=agent, skill=pref.skill)
    assert previews[hint.pk]["with"]["skill_tools"] == both["skill_tools"]
    assert previews[hint.pk]["with"]["skill_tools"][-1] == "pre_scan_inbox"


def test_previews_need_the_deltas_workspace(agent, workspace):
    delta = propose(agent)
    with pytest.raises(ValueError):
        delta_previews(workspace=WorkspaceFactory(), deltas=_pending(workspace, delta))
    assert delta_previews(workspace=workspace, deltas=[]) == {}


def test_previews_carry_ledger_progress_only_where_approval_needs_it(agent, workspace):
    evidence = propose(
        agent, "Offer two slots.", section="drafting-replies", provenance=OUTCOME_EVIDENCE
    )
    plain = propose(agent)
    for positive in (True, True, False):
        harness_feedback(agent=agent, action_type="reply", scope=evidence.scope, positive=positive)
    previews = delta_previews(workspace=workspace, deltas=_pending(workspace, evidence, plain))
    trust = previews[evidence.pk]["trust"]
    assert (trust["samples"], trust["positive"], trust["met"], trust["needed"]) == (
        3,
        2,
        False,
        True,
    )
    assert previews[plain.pk]["trust"] is None
