"""Evidence posted from outside the loop (SPEC section 4): ``POST /evidence/`` from a
token (``evidence_record``, once per id and channel) and a person's confirmation in the
UI (``evidence_confirm_by_person``). Both apply it through ``memory.lessons.evidence``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from cairn.errors import ApplicationError, NotFoundError
from memory.core.actors import Actor, actor_require_role
from memory.core.audit import audit_record
from memory.core.locks import advisory_xact_lock
from memory.lessons.evidence import EvidenceResult, evidence_apply, target_lock, target_model
from memory.models import Channel, Evidence, EvidenceKind, Lesson, TargetType, Workspace

# Kinds an agent may post; the other two are derived from outcomes by the server.
POSTABLE_KINDS = (EvidenceKind.DIFF_ACCEPTED, EvidenceKind.USER_CONFIRMED, EvidenceKind.SELF_REPORT)


def _evidence_target(*, workspace: Workspace, target_type: str, target_id: int):
    model = target_model(target_type)
    target = model.objects.filter(workspace=workspace, pk=target_id).first()
    if target is None:
        raise NotFoundError(
            f"No {target_type} {target_id} in this workspace.", fields={"target_id": ["not found"]}
        )
    return target


def _evidence_stored(*, workspace: Workspace, evidence_id: str, channel: str) -> dict | None:
    """The stored answer for this id from this channel (ids are per channel: an agent
    token's post under the harness's id is not the harness's report)."""
    row = Evidence.objects.filter(
        workspace=workspace, channel=channel, evidence_id=evidence_id
    ).first()
    return None if row is None else row.response


# A person's word, reported by the harness (which talks to the person) or given in the UI.
PERSON_KINDS = (EvidenceKind.DIFF_ACCEPTED, EvidenceKind.USER_CONFIRMED)


def evidence_record(
    *,
    workspace: Workspace,
    actor: Actor,
    evidence_id: str,
    kind: str,
    target_type: str,
    target_id: int,
) -> tuple[dict, bool]:
    """Record posted evidence once per ``evidence_id`` and channel; returns (body, created).

    0. ``user_confirmed`` and ``diff_accepted`` come only from the harness scope
       (or a person in the UI): from an agent token they are refused (403).
    1. A stored id answers with the stored body: nothing is applied twice.
    2. Otherwise insert the Evidence row and apply it in one transaction; a
       concurrent insert of the same id loses on the unique constraint and
       answers with the winner's body.
    """
    if kind not in POSTABLE_KINDS:
        raise ApplicationError(
            f"Evidence kind {kind!r} cannot be posted: test_passed and contradiction "
            "are derived by the server from outcomes.",
            code="kind_not_postable",
            fields={"kind": ["not postable"]},
        )
    if kind in PERSON_KINDS and not actor.weighs:
        raise ApplicationError(
            f"Evidence of kind {kind!r} says a person confirmed or accepted something; only "
            "a harness-scoped token (the process that talks to the person, never the model) "
            "may post it. Post self_report for the model's own view.",
            code="harness_scope_required",
            fields={"kind": [f"{kind} needs a harness-scoped token"]},
            status_code=403,
        )
    stored = _evidence_stored(workspace=workspace, evidence_id=evidence_id, channel=actor.channel)
    if stored is not None:
        return stored, False
    try:
        with transaction.atomic():
            target = _evidence_target(
                workspace=workspace, target_type=target_type, target_id=target_id
            )
            row = Evidence.objects.create(
                workspace=workspace,
                agent=actor.agent,
                evidence_id=evidence_id,
                kind=kind,
                target_type=target_type,
                target_id=target_id,
                channel=actor.channel,
            )
            result = evidence_apply(
                target=target, kind=kind, evidence_id=evidence_id, channel=actor.channel
            )
            body = {
                "id": row.pk,
                "evidence_id": evidence_id,
                "kind": kind,
                "target_type": target_type,
                "target_id": target_id,
                "channel": actor.channel,
                "counted_as": result.kind,
                "confidence_before": result.before,
                "confidence_after": result.after,
                "state": (
                    Lesson.objects.values_list("state", flat=True).get(
                        workspace=workspace, pk=target.pk
                    )
                    if target_type == TargetType.LESSON
                    else None
                ),
            }
            row.response = body
            row.save(update_fields=["response"])
            return body, True
    except IntegrityError:
        stored = _evidence_stored(
            workspace=workspace, evidence_id=evidence_id, channel=actor.channel
        )
        if stored is None:
            raise
        return stored, False


@transaction.atomic
def evidence_confirm_by_person(
    *, workspace: Workspace, target_type: str, target_id: int, actor: Actor, reason: str
) -> EvidenceResult:
    """A reviewer confirms a lesson or knowledge item in the UI: ``user_confirmed``
    evidence with the person as actor (+0.15; a claimed lesson becomes active).

    One person's confirmation of one target counts once per
    ``CAIRN_PERSON_CONFIRM_WINDOW_S``: a double-click, a resubmitted form or a second
    confirmation the same day is answered with the target as it is, nothing applied.
    The evidence id names person, target and window, so concurrent clicks take turns
    on it and the later ones find it recorded."""
    actor_require_role(actor, workspace=workspace, action=f"confirm a {target_type}")
    target = _evidence_target(workspace=workspace, target_type=target_type, target_id=target_id)
    window = int(timezone.now().timestamp() // settings.CAIRN_PERSON_CONFIRM_WINDOW_S)
    evidence_id = f"person:{actor.user.pk}:{target_type}:{target_id}:{window}"
    advisory_xact_lock(f"evidence:{workspace.pk}:{evidence_id}")
    if Evidence.objects.filter(workspace=workspace, evidence_id=evidence_id).exists():
        target = target_lock(target)
        return EvidenceResult(
            target=target,
            target_type=target_type,
            target_id=target.pk,
            before=float(target.confidence),
            after=float(target.confidence),
            kind=EvidenceKind.USER_CONFIRMED,
        )
    Evidence.objects.create(
        workspace=workspace,
        agent=None,
        evidence_id=evidence_id,
        kind=EvidenceKind.USER_CONFIRMED,
        target_type=target_type,
        target_id=target_id,
        channel=Channel.PERSON,
    )
    result = evidence_apply(
        target=target,
        kind=EvidenceKind.USER_CONFIRMED,
        evidence_id=evidence_id,
        channel=Channel.PERSON,
    )
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action=f"{target_type}.confirm",
        target_type=target_type,
        target_id=target_id,
        reason=reason,
        details={"evidence_id": evidence_id, "before": result.before, "after": result.after},
    )
    return result
