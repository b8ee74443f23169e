"""The skills jobs: resident budget enforcement and umbrella consolidation."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from memory.core.actors import Actor
from memory.models import AuditEvent, JobRun, SkillDelta
from memory.skills.consent import delta_approve
from memory.skills.deltas import delta_create
from memory.skills.jobs import delta_budget_enforce, delta_consolidate
from memory.skills.registry import agent_tools_set, skill_register
from memory.tasks import skills_budget, skills_consolidate
from tests.factories.identity import AgentFactory, WorkspaceFactory
from tests.factories.skills import EMAIL_TOOLS, backed, reviewer, skill_md

USER = {"source": "user_instruction", "turns": ["s1#1"]}
SAME = [
    "Keep replies to recruiters to two sentences.",
    "Keep replies to recruiters to two sentences only.",
    "Keep recruiter replies to two sentences.",
]


def setup_agent(workspace=None):
    workspace = workspace or WorkspaceFactory()
    agent = AgentFactory(workspace=workspace)
    skill_register(workspace=workspace, skill_md=skill_md(), actor=Actor.system("test"))
    agent_tools_set(agent=agent, tools=EMAIL_TOOLS)
    return agent


def active(agent, text, section="drafting-replies", person=None):
    delta = delta_create(
        channel="agent",
        agent=agent,
        skill_name="triage-inbox",
        kind="preference",
        anchor={"section": section},
        payload={"body": text},
        provenance=backed(agent, USER, said=text),
    ).delta
    return delta_approve(
        delta=delta, actor=Actor.for_user(person or reviewer(agent.workspace)), reason="ok"
    )


# --------------------------------------------------------------------------- budget


@pytest.mark.django_db
def test_the_least_used_become_retrieval_only_then_archived(settings):
    agent = setup_agent()
    person = reviewer(agent.workspace)
    deltas = [active(agent, f"Rule number {n} for replies.", person=person) for n in range(4)]
    for delta, uses in zip(deltas, (5, 0, 3, 1), strict=True):
        SkillDelta.objects.filter(pk=delta.pk).update(use_count=uses)
    settings.CAIRN_SKILL_RESIDENT_TOKEN_BUDGET = deltas[0].tokens * 2
    counts = delta_budget_enforce(workspace=agent.workspace)
    assert counts == {"agents": 1, "demoted": 2, "promoted": 0, "archived": 0}
    demoted = set(SkillDelta.objects.filter(retrieval_only=True).values_list("pk", flat=True))
    assert demoted == {deltas[1].pk, deltas[3].pk}
    assert AuditEvent.objects.filter(action="delta.demote_retrieval").count() == 2
    # Idempotent: a second run changes nothing.
    assert delta_budget_enforce(workspace=agent.workspace)["demoted"] == 0
    # Unused retrieval-only deltas are archived after CAIRN_SKILL_RETRIEVAL_ARCHIVE_DAYS.
    soon = timezone.now() + timedelta(days=settings.CAIRN_SKILL_RETRIEVAL_ARCHIVE_DAYS - 1)
    assert delta_budget_enforce(workspace=agent.workspace, now=soon)["archived"] == 0
    later = timezone.now() + timedelta(days=settings.CAIRN_SKILL_RETRIEVAL_ARCHIVE_DAYS + 1)
    SkillDelta.objects.filter(pk=deltas[3].pk).update(last_used_at=later - timedelta(days=1))
    counts = delta_budget_enforce(workspace=agent.workspace, now=later)
    assert counts["archived"] == 1
    assert SkillDelta.objects.get(pk=deltas[1].pk).status == "archived"
    assert SkillDelta.objects.get(pk=deltas[3].pk).status == "active"
    assert SkillDelta.objects.count() == 4  # archived, never deleted
    # A freed budget lets a retrieval-only delta become resident again.
    settings.CAIRN_SKILL_RESIDENT_TOKEN_BUDGET = 600
    assert delta_budget_enforce(workspace=agent.workspace)["promoted"] == 1
    assert not SkillDelta.objects.filter(status="active", retrieval_only=True).exists()


@pytest.mark.django_db
def test_the_budget_is_per_agent(settings):
    agent = setup_agent()
    other = AgentFactory(workspace=agent.workspace)
    agent_tools_set(agent=other, tools=EMAIL_TOOLS)
    person = reviewer(agent.workspace)
    first = active(agent, "Rule one for replies.", person=person)
    active(other, "Rule two for replies.", person=person)
    settings.CAIRN_SKILL_RESIDENT_TOKEN_BUDGET = first.tokens
    assert delta_budget_enforce()["demoted"] == 0


# --------------------------------------------------------------------------- consolidation


@pytest.mark.django_db
def test_near_identical_deltas_on_one_anchor_get_a_staged_umbrella():
    agent = setup_agent()
    person = reviewer(agent.workspace)
    members = [active(agent, text, person=person) for text in SAME]
    other_anchor = active(agent, SAME[0], section="escalation", person=person)
    different = active(agent, "Sign off with first name only.", person=person)
    counts = delta_consolidate(workspace=agent.workspace)
    assert counts["proposed"] == 1
    umbrella = SkillDelta.objects.get(provenance_source="consolidation")
    assert umbrella.status == "staged"
    assert sorted(m.pk for m in umbrella.members.all()) == sorted(m.pk for m in members)
    assert umbrella.payload["body"] in SAME
    assert umbrella.anchor_section == "drafting-replies"
    assert other_anchor.pk not in {m.pk for m in umbrella.members.all()}
    assert different.pk not in {m.pk for m in umbrella.members.all()}
    # Never an automatic rewrite: the members are untouched until a person approves.
    assert set(
        SkillDelta.objects.filter(pk__in=[m.pk for m in members]).values_list("status", flat=True)
    ) == {"active"}
    assert delta_consolidate(workspace=agent.workspace)["proposed"] == 0
    delta_approve(delta=umbrella, actor=Actor.for_user(person), reason="one rule is enough")
    for member in SkillDelta.objects.filter(pk__in=[m.pk for m in members]):
        assert member.status == "archived"
        assert member.superseded_by_id == umbrella.pk
    assert SkillDelta.objects.get(pk=umbrella.pk).status == "active"


@pytest.mark.django_db
def test_two_near_identical_deltas_are_not_enough():
    agent = setup_agent()
    person = reviewer(agent.workspace)
    for text in SAME[:2]:
        active(agent, text, person=person)
    assert delta_consolidate()["proposed"] == 0


# --------------------------------------------------------------------------- real worker


def _wait_for(predicate, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


@pytest.mark.django_db(transaction=True)
def test_the_jobs_run_on_a_real_worker(celery_worker_process, settings):
    agent = setup_agent()
    person = reviewer(agent.workspace)
    for text in SAME:
        active(agent, text, person=person)
    run_id = skills_consolidate.delay(workspace_id=agent.workspace_id).get(timeout=60)
    run = JobRun.objects.get(pk=run_id)
    assert run.kind == "skills.consolidate"
    assert run.status == JobRun.Status.SUCCEEDED
    assert run.counts["proposed"] == 1
    assert (
        SkillDelta.objects.filter(provenance_source="consolidation", status="staged").count() == 1
    )
    budget_run = JobRun.objects.create(kind="skills.budget", workspace=agent.workspace)
    skills_budget.delay(run_id=budget_run.pk, workspace_id=agent.workspace_id)
    _wait_for(lambda: JobRun.objects.get(pk=budget_run.pk).status == JobRun.Status.SUCCEEDED)
    assert JobRun.objects.get(pk=budget_run.pk).counts == {
        "agents": 1,
        "demoted": 0,
        "promoted": 0,
        "archived": 0,
    }
