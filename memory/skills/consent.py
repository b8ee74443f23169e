"""The consent gate: only a reviewer or admin approves, confirms, rejects,
reverts, resets or re-approves a learned delta (SPEC section 6)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.actors import Actor, actor_require_role
from memory.core.audit import audit_record
from memory.core.consent import Consent, consent_by_role
from memory.core.validation import bad_request
from memory.models import (
    Agent,
    DeltaStatus,
    DeltaTrust,
    OrphanNotice,
    ProvenanceSource,
    Skill,
    SkillDelta,
    WebhookEvent,
)
from memory.skills.selectors import delta_reanchor_check
from memory.skills.skillmd import local_capabilities
from memory.skills.trust import trust_progress_get
from memory.webhooks.events import delta_event


def _locked(delta: SkillDelta) -> SkillDelta:
    return (
        SkillDelta.objects.select_for_update(of=("self",))
        .select_related("skill", "skill__current_version", "workspace", "anchor_version")
        .get(pk=delta.pk)
    )


CHANGE_STATUS = "change a delta's status"


def _locked_for_change(delta: SkillDelta, *, actor: Actor) -> SkillDelta:
    """The delta, locked, once ``actor`` is shown to be allowed to change its status."""
    actor_require_role(actor, workspace=delta.workspace, action=CHANGE_STATUS)
    return _locked(delta)


def _consented_change(delta: SkillDelta, *, actor: Actor) -> tuple[SkillDelta, Consent]:
    """The delta, locked, and the reviewer's consent (403 for anyone else)."""
    consent = consent_by_role(actor=actor, workspace=delta.workspace, action=CHANGE_STATUS)
    return _locked(delta), consent


def _transition_refuse(delta: SkillDelta, wanted: str, hint: str = "") -> ApplicationError:
    return ApplicationError(
        f"Delta {delta.pk} is {delta.status}; {wanted}.{(' ' + hint) if hint else ''}",
        code="invalid_transition",
        fields={"status": [delta.status]},
    )


def _evidence(delta: SkillDelta) -> dict:
    """The trust-ledger bar for outcome_evidence deltas; refuses (422) with progress."""
    progress = trust_progress_get(workspace=delta.workspace, scope=delta.scope)
    if not progress["met"]:
        raise ApplicationError(
            f"Not enough evidence to approve delta {delta.pk}: {progress['message']} "
            f"(needs {progress['required_samples']} at ≥ {progress['required_ratio']:.0%} "
            "positive). Post outcomes to /api/v1/feedback/ on this scope.",
            code="insufficient_evidence",
            fields={"scope": [progress["message"]]},
        )
    return progress


def _base_refuse(delta: SkillDelta) -> None:
    version = delta.skill.current_version
    if delta.anchor_version_id != version.pk:
        raise _transition_refuse(delta, "its base has changed", "Re-approve it as an orphan.")
    if local_capabilities(version.permissions):
        raise ApplicationError(
            f"Skill {delta.skill.name!r} now has a local-capability permission; deltas on it "
            "cannot be approved.",
            code="local_capability_skill",
            fields={"skill": ["capability-bearing skill"]},
        )


def _transition_audit(
    delta: SkillDelta, *, actor: str, action: str, reason: str, previous: str
) -> None:
    """The audit event of a status change, naming the status before and after."""
    audit_record(
        workspace=delta.workspace,
        actor=actor,
        action=action,
        target_type="skill_delta",
        target_id=delta.pk,
        reason=reason,
        details={"from": previous, "to": delta.status},
    )


def _delta_activate(
    delta: SkillDelta, *, consent: Consent, reason: str, action: str, **extra
) -> None:
    """Make ``delta`` active on ``consent`` (a reviewer's role, or the person's own
    sentence); an approved umbrella supersedes its members. The one way to activate.

    ``outcome_evidence`` deltas also need the trust ledger's bar.
    """
    if not isinstance(consent, Consent):
        raise TypeError("a delta becomes active only on a Consent")
    # A reviewer decides in their own name; a person's sentence is applied by the job.
    actor = consent.by if consent.basis == "role" else "system:auto-approve"
    if delta.provenance_source == ProvenanceSource.OUTCOME_EVIDENCE:
        progress = _evidence(delta)
        delta.approval_samples = progress["samples"]
        delta.approval_positive = progress["positive"]
    previous = delta.status
    delta.status = DeltaStatus.ACTIVE
    delta.approved_at = timezone.now()
    delta.approved_by = actor
    for name, value in extra.items():
        setattr(delta, name, value)
    delta.save()
    _transition_audit(delta, actor=actor, action=action, reason=reason, previous=previous)
    delta_event(
        delta=delta, event=WebhookEvent.DELTA_DECIDED, decision="approved", decided_by=actor
    )
    for member in delta.members.select_for_update().exclude(status=DeltaStatus.ARCHIVED):
        delta_archive(member, actor=actor, reason=f"superseded by umbrella delta {delta.pk}")
        SkillDelta.objects.filter(pk=member.pk).update(superseded_by=delta)


def delta_auto_approve(delta: SkillDelta, *, consent: Consent, setting: str) -> None:
    """staged → active with no reviewer: only on the person's own sentence
    (``consent_by_turn``), when the workspace opted in (``setting``)."""
    if consent.basis != "said":
        raise TypeError("auto-approval needs the person's own sentence")
    _delta_activate(
        delta,
        consent=consent,
        reason=f"workspace setting {setting}; {consent.by}",
        action="delta.auto_approve",
    )


def delta_archive(
    delta: SkillDelta,
    *,
    actor: str,
    reason: str,
    action: str = "delta.archive",
    seen: dict | None = None,
) -> None:
    previous = delta.status
    delta.status = DeltaStatus.ARCHIVED
    fields = ["status", "updated_at"]
    if seen is not None:
        delta.decision_seen = seen
        fields.append("decision_seen")
    delta.save(update_fields=fields)
    _transition_audit(delta, actor=actor, action=action, reason=reason, previous=previous)


@transaction.atomic
def delta_approve(
    *, delta: SkillDelta, actor: Actor, reason: str = "", seen: dict | None = None
) -> SkillDelta:
    """staged → active, by a reviewer. ``outcome_evidence`` also needs the ledger bar.

    Applies from the next session: sessions already running keep their resolution.
    ``seen`` (``memory.skills.decisions.decision_seen_of``) records the diff the
    reviewer was shown, for the delta's permalink.
    """
    delta, consent = _consented_change(delta, actor=actor)
    if delta.status == DeltaStatus.QUARANTINED:
        raise _transition_refuse(
            delta, "untrusted deltas need explicit confirmation", "Use delta_confirm_quarantined."
        )
    if delta.status == DeltaStatus.ORPHANED:
        raise _transition_refuse(delta, "orphans are re-approved", "Use delta_reapprove.")
    if delta.status != DeltaStatus.STAGED:
        raise _transition_refuse(delta, "only staged deltas can be approved")
    _base_refuse(delta)
    extra = {"decision_seen": seen} if seen is not None else {}
    _delta_activate(delta, consent=consent, reason=reason, action="delta.approve", **extra)
    return delta


@transaction.atomic
def delta_confirm_quarantined(
    *, delta: SkillDelta, actor: Actor, reason: str = "", seen: dict | None = None
) -> SkillDelta:
    """quarantined → active: a person's explicit, per-delta decision (audited)."""
    delta, consent = _consented_change(delta, actor=actor)
    if delta.status != DeltaStatus.QUARANTINED:
        raise _transition_refuse(delta, "only quarantined deltas are confirmed this way")
    if not reason.strip():
        raise bad_request("reason", "Confirming an untrusted delta needs a reason.")
    _base_refuse(delta)
    extra = {"decision_seen": seen} if seen is not None else {}
    _delta_activate(
        delta, consent=consent, reason=reason, action="delta.confirm_quarantined", **extra
    )
    return delta


@transaction.atomic
def delta_reject(
    *, delta: SkillDelta, actor: Actor, reason: str = "", seen: dict | None = None
) -> SkillDelta:
    """staged, quarantined or orphaned → archived."""
    delta = _locked_for_change(delta, actor=actor)
    if delta.status not in {DeltaStatus.STAGED, DeltaStatus.QUARANTINED, DeltaStatus.ORPHANED}:
        raise _transition_refuse(delta, "only pending deltas can be rejected", "Revert it instead.")
    delta_archive(delta, actor=actor.label, reason=reason, action="delta.reject", seen=seen)
    delta_event(
        delta=delta, event=WebhookEvent.DELTA_DECIDED, decision="rejected", decided_by=actor.label
    )
    return delta


@transaction.atomic
def delta_revert(*, delta: SkillDelta, actor: Actor, reason: str = "") -> SkillDelta:
    """active → archived (the base behaviour returns from the next session)."""
    delta = _locked_for_change(delta, actor=actor)
    if delta.status != DeltaStatus.ACTIVE:
        raise _transition_refuse(delta, "only active deltas can be reverted")
    delta_archive(delta, actor=actor.label, reason=reason, action="delta.revert")
    return delta


@transaction.atomic
def delta_reset(*, skill: Skill, agent: Agent, actor: Actor, reason: str = "") -> int:
    """Archive every learned delta ``agent`` has on ``skill``: back to the pure base."""
    if skill.workspace_id != agent.workspace_id:
        raise ApplicationError("The agent and the skill are in different workspaces.")
    actor_require_role(actor, workspace=skill.workspace, action=CHANGE_STATUS)
    deltas = list(
        SkillDelta.objects.select_for_update()
        .select_related("workspace")
        .filter(skill=skill, agent=agent)
        .exclude(status=DeltaStatus.ARCHIVED)
        .order_by("id")
    )
    for delta in deltas:
        delta_archive(delta, actor=actor.label, reason=reason, action="delta.reset")
    return len(deltas)


@transaction.atomic
def delta_reapprove(
    *,
    deltas: list[SkillDelta],
    actor: Actor,
    reason: str = "",
    seen: dict[int, dict] | None = None,
) -> dict:
    """Re-approve orphans (one or many) onto their skill's current version.

    1. Each orphan is re-anchored by slug to the current version; if the slug
       is gone it is refused (``section_gone``) and stays orphaned.
    2. If the section's digest changed it is flagged ``stale``.
    3. Trusted deltas become active (outcome_evidence still needs its ledger
       bar); untrusted ones go back to quarantine for a per-delta confirmation.
    Returns ``{"reapproved": [ids], "quarantined": [ids], "refused": [{id, code, message}]}``.
    ``seen`` maps a delta id to the diff its reviewer was shown (see ``delta_approve``).
    """
    result: dict = {"reapproved": [], "quarantined": [], "refused": []}
    workspaces = {d.workspace_id for d in deltas}
    if len(workspaces) > 1:
        raise ApplicationError("Re-approve deltas of one workspace at a time.")
    if not deltas:
        return result
    consent = consent_by_role(actor=actor, workspace=deltas[0].workspace, action=CHANGE_STATUS)
    for pk in sorted({d.pk for d in deltas}):
        delta = _locked(SkillDelta(pk=pk))
        version = delta.skill.current_version
        check = delta_reanchor_check(delta=delta, version=version)
        refusal = check["refusal"]
        if refusal is None:
            stale = check["stale"]
            if delta.trust == DeltaTrust.UNTRUSTED:
                previous = delta.status
                delta.status = DeltaStatus.QUARANTINED
                delta.anchor_version = version
                delta.stale = stale
                delta.save()
                audit_record(
                    workspace=delta.workspace,
                    actor=actor.label,
                    action="delta.reapprove",
                    target_type="skill_delta",
                    target_id=delta.pk,
                    reason=reason,
                    details={"from": previous, "to": delta.status, "stale": stale},
                )
                result["quarantined"].append(delta.pk)
                continue
            try:
                with transaction.atomic():
                    _delta_activate(
                        delta,
                        consent=consent,
                        reason=reason,
                        action="delta.reapprove",
                        anchor_version=version,
                        stale=stale,
                        **({"decision_seen": seen[pk]} if seen and pk in seen else {}),
                    )
            except ApplicationError as exc:
                refusal = (exc.code, exc.message)
            else:
                result["reapproved"].append(delta.pk)
                continue
        result["refused"].append({"id": delta.pk, "code": refusal[0], "message": refusal[1]})
    return result


@transaction.atomic
def orphan_notice_mark_seen(*, notice: OrphanNotice, actor: Actor) -> OrphanNotice:
    """The UI shows each orphan notice once; this records that it was seen."""
    actor_require_role(actor, workspace=notice.workspace, action=CHANGE_STATUS)
    if notice.seen_at is None:
        notice.seen_at = timezone.now()
        notice.seen_by = actor.label
        notice.save(update_fields=["seen_at", "seen_by"])
        audit_record(
            workspace=notice.workspace,
            actor=actor.label,
            action="orphan_notice.seen",
            target_type="skill",
            target_id=notice.skill_id,
            details={"version": notice.version.version, "count": notice.count},
        )
    return notice
