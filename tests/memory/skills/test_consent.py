"""The consent gate, the trust ledger, orphaning on base change and re-approval, KPIs,
and deleting a workspace."""

import pytest
from django.db import IntegrityError, transaction

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.models import AuditEvent, OrphanNotice, Role, SkillDelta
from memory.skills.consent import (
    delta_approve,
    delta_confirm_quarantined,
    delta_reapprove,
    delta_reject,
    delta_reset,
    delta_revert,
    orphan_notice_mark_seen,
)
from memory.skills.deltas import delta_create
from memory.skills.registry import agent_tools_set, skill_register
from memory.skills.selectors import orphan_notice_list, skill_kpis
from memory.skills.trust import delta_trust_progress
from tests.factories.identity import AgentFactory, WorkspaceFactory
from tests.factories.skills import (
    EMAIL_TOOLS,
    TRIAGE_BODY,
    backed,
    harness_feedback,
    reviewer,
    skill_md,
)

pytestmark = pytest.mark.django_db

USER = {"source": "user_instruction", "turns": ["s1#1"]}
EVIDENCE = {"source": "outcome_evidence", "turns": ["s1#2"]}
OBSERVED = {"source": "observed_content", "turns": ["s1#3"]}


@pytest.fixture
def agent(workspace):
    agent = AgentFactory(workspace=workspace)
    skill_register(workspace=workspace, skill_md=skill_md(), actor=Actor.system("test"))
    agent_tools_set(agent=agent, tools=EMAIL_TOOLS)
    return agent


def pref(
    agent, text="Escalate CFO threads after 48 hours.", provenance=USER, section="escalation", **kw
):
    return delta_create(
        channel="agent",
        agent=agent,
        skill_name="triage-inbox",
        kind="preference",
        anchor={"section": section},
        payload={"body": text},
        provenance=backed(agent, provenance, said=text),
        **kw,
    ).delta


def samples(agent, scope, positives, negatives=0):
    for _ in range(positives):
        harness_feedback(agent=agent, action_type="triage", scope=scope, positive=True)
    for _ in range(negatives):
        harness_feedback(agent=agent, action_type="triage", scope=scope, positive=False)


# --------------------------------------------------------------------------- consent gate


def test_only_a_reviewer_or_admin_may_approve(agent, workspace):
    delta = pref(agent)
    viewer = reviewer(workspace, role=Role.VIEWER)
    with pytest.raises(ApplicationError) as refused:
        delta_approve(delta=delta, actor=Actor.for_user(viewer), reason="looks fine")
    assert refused.value.status_code == 403
    outsider = reviewer(WorkspaceFactory(), role=Role.ADMIN)
    with pytest.raises(ApplicationError):
        delta_approve(delta=delta, actor=Actor.for_user(outsider), reason="not my workspace")
    assert SkillDelta.objects.get(pk=delta.pk).status == "staged"
    approved = delta_approve(
        delta=delta, actor=Actor.for_user(reviewer(workspace)), reason="matches what I said"
    )
    assert approved.status == "active"
    assert approved.approved_at is not None
    event = AuditEvent.objects.get(action="delta.approve", target_id=str(delta.pk))
    assert event.actor == f"user:reviewer-{workspace.pk}"
    assert event.reason == "matches what I said"
    admin = reviewer(workspace, role=Role.ADMIN)
    delta_revert(delta=approved, actor=Actor.for_user(admin), reason="changed my mind")
    assert SkillDelta.objects.get(pk=delta.pk).status == "archived"


def test_quarantined_is_never_auto_approved_and_needs_explicit_confirmation(agent, workspace):
    workspace.settings = {"auto_approve_user_instruction": True}
    workspace.save()
    delta = pref(agent, provenance=OBSERVED)
    assert delta.status == "quarantined"
    person = reviewer(workspace)
    with pytest.raises(ApplicationError) as refused:
        delta_approve(delta=delta, actor=Actor.for_user(person), reason="ok")
    assert refused.value.code == "invalid_transition"
    with pytest.raises(ApplicationError):
        delta_confirm_quarantined(delta=delta, actor=Actor.for_user(person), reason="  ")
    confirmed = delta_confirm_quarantined(
        delta=delta, actor=Actor.for_user(person), reason="I checked the source"
    )
    assert confirmed.status == "active"
    event = AuditEvent.objects.get(action="delta.confirm_quarantined")
    assert (event.actor, event.reason) == (f"user:reviewer-{workspace.pk}", "I checked the source")


def test_the_database_refuses_a_system_activation_of_an_untrusted_delta(agent):
    delta = pref(agent, provenance=OBSERVED)
    with pytest.raises(IntegrityError), transaction.atomic():
        SkillDelta.objects.filter(pk=delta.pk).update(
            status="active", approved_by="system:auto-approve"
        )


def test_outcome_evidence_needs_five_samples_at_085(agent, workspace):
    delta = pref(agent, provenance=EVIDENCE, scope="triage:cfo")
    person = reviewer(workspace)
    samples(agent, "triage:cfo", 3)
    with pytest.raises(ApplicationError) as refused:
        delta_approve(delta=delta, actor=Actor.for_user(person), reason="ok")
    assert refused.value.code == "insufficient_evidence"
    assert "3 of 5 samples" in refused.value.message
    assert delta_trust_progress(delta=delta)["message"] == "3 of 5 samples on scope 'triage:cfo'"
    samples(agent, "triage:cfo", 1, negatives=1)  # 4 of 5 positive = 0.80
    with pytest.raises(ApplicationError) as still:
        delta_approve(delta=delta, actor=Actor.for_user(person), reason="ok")
    assert "80%" in still.value.message
    samples(agent, "other-scope", 20)  # other scopes do not count
    with pytest.raises(ApplicationError):
        delta_approve(delta=delta, actor=Actor.for_user(person), reason="ok")
    samples(agent, "triage:cfo", 2)  # 6 of 7 = 0.857
    progress = delta_trust_progress(delta=delta)
    assert progress["met"] and progress["needed"]
    approved = delta_approve(delta=delta, actor=Actor.for_user(person), reason="the record is good")
    assert approved.status == "active"
    assert (approved.approval_samples, approved.approval_positive) == (7, 6)


def test_evidence_never_auto_approves(agent, workspace):
    workspace.settings = {"auto_approve_user_instruction": True}
    workspace.save()
    samples(agent, "skill:triage-inbox", 10)
    assert pref(agent, provenance=EVIDENCE).status == "staged"


def test_reject_revert_and_reset_archive_and_delete_nothing(agent, workspace):
    person = reviewer(workspace)
    staged = pref(agent, text="one")
    quarantined = pref(agent, text="two", provenance=OBSERVED)
    active = delta_approve(
        delta=pref(agent, text="three"), actor=Actor.for_user(person), reason="ok"
    )
    delta_reject(delta=staged, actor=Actor.for_user(person), reason="wrong")
    delta_reject(delta=quarantined, actor=Actor.for_user(person), reason="from spam")
    with pytest.raises(ApplicationError):
        delta_revert(delta=staged, actor=Actor.for_user(person), reason="already archived")
    with pytest.raises(ApplicationError):
        delta_reject(delta=active, actor=Actor.for_user(person), reason="use revert")
    more = [pref(agent, text=t) for t in ("four", "five")]
    assert (
        delta_reset(
            skill=active.skill, agent=agent, actor=Actor.for_user(person), reason="start over"
        )
        == 3
    )
    assert SkillDelta.objects.count() == 5
    assert set(SkillDelta.objects.values_list("status", flat=True)) == {"archived"}
    assert AuditEvent.objects.filter(action="delta.reset").count() == 3
    assert more[0].pk in {int(e.target_id) for e in AuditEvent.objects.filter(action="delta.reset")}


def test_another_agents_delta_is_not_reset(agent, workspace):
    other = AgentFactory(workspace=workspace)
    agent_tools_set(agent=other, tools=EMAIL_TOOLS)
    mine, theirs = pref(agent), pref(other)
    delta_reset(skill=mine.skill, agent=agent, actor=Actor.for_user(reviewer(workspace)), reason="")
    assert SkillDelta.objects.get(pk=theirs.pk).status == "staged"


# --------------------------------------------------------------------------- base update


def test_a_changed_body_orphans_every_attached_delta_visibly(agent, workspace):
    person = reviewer(workspace)
    active = delta_approve(delta=pref(agent, text="a"), actor=Actor.for_user(person), reason="ok")
    staged = pref(agent, text="b", section="drafting-replies")
    quarantined = pref(agent, text="c", provenance=OBSERVED)
    archived = pref(agent, text="d")
    delta_reject(delta=archived, actor=Actor.for_user(person), reason="no")
    result = skill_register(
        workspace=workspace,
        skill_md=skill_md(version="2.0.0", body=TRIAGE_BODY + "\n## Filing\nFile receipts.\n"),
        actor=Actor.system("test"),
    )
    assert result.orphaned == 3
    statuses = dict(SkillDelta.objects.values_list("pk", "status"))
    assert statuses == {
        active.pk: "orphaned",
        staged.pk: "orphaned",
        quarantined.pk: "orphaned",
        archived.pk: "archived",
    }
    assert AuditEvent.objects.filter(action="delta.orphan", actor="system:orphan").count() == 3
    notice = OrphanNotice.objects.get()
    assert (notice.count, notice.version.version, notice.seen_at) == (3, "2.0.0", None)
    assert list(orphan_notice_list(workspace=workspace)) == [notice]
    orphan_notice_mark_seen(notice=notice, actor=Actor.for_user(person))
    assert list(orphan_notice_list(workspace=workspace)) == []
    assert skill_kpis(workspace=workspace)["orphans_pending"] == 3


def test_a_whitespace_only_version_does_not_orphan(agent, workspace):
    delta = delta_approve(delta=pref(agent), actor=Actor.for_user(reviewer(workspace)), reason="ok")
    spaced = TRIAGE_BODY.replace("\n\n", "\n\n\n").replace("polite.", "polite.   ")
    result = skill_register(
        workspace=workspace,
        skill_md=skill_md(version="1.0.1", body=spaced),
        actor=Actor.system("t"),
    )
    assert result.orphaned == 0
    delta.refresh_from_db()
    assert delta.status == "active"
    assert delta.anchor_version.version == "1.0.1"
    assert not OrphanNotice.objects.exists()


def test_a_new_local_capability_orphans_too(agent, workspace):
    delta = pref(agent)
    skill_register(
        workspace=workspace,
        skill_md=skill_md(version="1.0.1", permissions=("'shell:execute:git'",)),
        actor=Actor.system("t"),
    )
    assert SkillDelta.objects.get(pk=delta.pk).status == "orphaned"


def test_bulk_reapprove_reanchors_and_flags_stale(agent, workspace):
    person = reviewer(workspace)
    samples(agent, "skill:triage-inbox", 2)
    unchanged = delta_approve(
        delta=pref(agent, text="a", section="drafting-replies"),
        actor=Actor.for_user(person),
        reason="ok",
    )
    changed = delta_approve(
        delta=pref(agent, text="b", section="escalation"), actor=Actor.for_user(person), reason="ok"
    )
    untrusted = pref(agent, text="c", provenance=OBSERVED, section="drafting-replies")
    evidence = pref(agent, text="d", provenance=EVIDENCE, section="drafting-replies")
    gone = pref(agent, text="e", section="triage-inbox")
    new_body = (
        "\n# Inbox triage\n\nSort new mail.\n\n## Escalation\nEscalate after one day.\n\n"
        "## Drafting replies\nKeep replies short and polite.\n"
    )
    skill_register(
        workspace=workspace,
        skill_md=skill_md(version="2.0.0", body=new_body),
        actor=Actor.system("t"),
    )
    assert SkillDelta.objects.filter(status="orphaned").count() == 5
    result = delta_reapprove(
        deltas=[unchanged, changed, untrusted, evidence, gone],
        actor=Actor.for_user(person),
        reason="reviewed v2",
    )
    assert sorted(result["reapproved"]) == sorted([unchanged.pk, changed.pk])
    assert result["quarantined"] == [untrusted.pk]
    refused = {r["id"]: r["code"] for r in result["refused"]}
    assert refused == {evidence.pk: "insufficient_evidence", gone.pk: "section_gone"}
    rows = {d.pk: d for d in SkillDelta.objects.select_related("anchor_version")}
    assert rows[unchanged.pk].stale is False
    assert rows[changed.pk].stale is True
    assert rows[changed.pk].anchor_version.version == "2.0.0"
    assert rows[untrusted.pk].status == "quarantined"
    assert rows[evidence.pk].status == "orphaned"
    assert rows[gone.pk].status == "orphaned"
    assert AuditEvent.objects.filter(action="delta.reapprove", reason="reviewed v2").count() == 3
    viewer = reviewer(workspace, role=Role.VIEWER)
    with pytest.raises(ApplicationError):
        delta_reapprove(deltas=[gone], actor=Actor.for_user(viewer), reason="x")


def test_a_staged_delta_on_an_old_base_cannot_be_approved(agent, workspace):
    delta = pref(agent)
    skill_register(
        workspace=workspace,
        skill_md=skill_md(version="2", body="\n## Other\nx\n"),
        actor=Actor.system("t"),
    )
    with pytest.raises(ApplicationError) as refused:
        delta_approve(delta=delta, actor=Actor.for_user(reviewer(workspace)), reason="ok")
    assert "reapprove" in refused.value.message


# --------------------------------------------------------------------------- KPIs


def test_kpis_and_the_evidence_invariant(agent, workspace):
    person = reviewer(workspace)
    samples(agent, "skill:triage-inbox", 5)
    delta_approve(
        delta=pref(agent, provenance=EVIDENCE, text="a"), actor=Actor.for_user(person), reason="ok"
    )
    pref(agent, provenance=EVIDENCE, text="b", scope="thin")
    samples(agent, "thin", 4, negatives=1)
    delta_create(
        channel="agent",
        agent=agent,
        skill_name="triage-inbox",
        kind="tool-hint",
        anchor={"section": "escalation"},
        payload={"prefer": ["pre_scan_inbox"]},
        provenance=backed(agent, USER, said="pre_scan_inbox"),
    )
    delta_create(
        channel="agent",
        agent=agent,
        skill_name="triage-inbox",
        kind="fact",
        anchor=None,
        payload={"namespace": "priority_senders", "key": "cfo@x.example", "value": True},
        provenance=backed(agent, USER, said="cfo@x.example is true."),
    )
    kpis = skill_kpis(workspace=workspace)
    assert kpis["deltas_by_tier_status"] == {"1": {"staged": 1}, "3": {"active": 1, "staged": 1}}
    assert kpis["tier01_learnings"] == 2
    assert kpis["learnings"] == 4
    assert kpis["tier01_share"] == 0.5
    assert kpis["activations_below_threshold"] == 0
    assert kpis["untrusted_active_unconfirmed"] == 0
    # The invariant holds in the database as well: no active outcome_evidence delta
    # can exist without the evidence it was approved on.
    thin = SkillDelta.objects.get(scope="thin")
    with pytest.raises(IntegrityError), transaction.atomic():
        SkillDelta.objects.filter(pk=thin.pk).update(status="active")
    for delta in SkillDelta.objects.filter(status="active", provenance_source="outcome_evidence"):
        assert delta.approval_samples >= 5
        assert delta.approval_positive / delta.approval_samples >= 0.85


# --------------------------------------------------------------------------- deletion


def test_deleting_a_workspace_removes_its_skill_rows(agent, workspace):
    # Erasure (a separate admin operation) really deletes: nothing here may block it.
    from memory.models import LearnedFact, Skill, SkillVersion

    delta_approve(delta=pref(agent), actor=Actor.for_user(reviewer(workspace)), reason="ok")
    skill_register(
        workspace=workspace,
        skill_md=skill_md(version="2", body="\n## X\ny\n"),
        actor=Actor.system("t"),
    )
    harness_feedback(agent=agent, action_type="a", scope="s", positive=True)
    workspace.delete()
    assert not Skill.objects.exists()
    assert not SkillVersion.objects.exists()
    assert not SkillDelta.objects.exists()
    assert not OrphanNotice.objects.exists()
    assert not LearnedFact.objects.exists()
