"""The audit log: one row per decision, in the same transaction as the change."""

from __future__ import annotations

from django.db.models import Q, TextField
from django.db.models.functions import Cast

from memory.models import AuditEvent, Workspace

# What an erased reason reads as: the decision stays in the log, its words go.
REASON_ERASED = "[erased]"


def audit_record(
    *,
    workspace: Workspace | None,
    actor: str,
    action: str,
    target_type: str = "",
    target_id=None,
    reason: str = "",
    details: dict | None = None,
) -> AuditEvent:
    """Append an audit event. ``details`` must never carry item content."""
    return AuditEvent.objects.create(
        workspace=workspace,
        actor=actor[:200],
        action=action,
        target_type=target_type,
        target_id="" if target_id is None else str(target_id),
        reason=reason,
        details=details or {},
    )


def audit_reasons_redact(
    *,
    workspace: Workspace,
    target_type: str = "",
    target_ids=(),
    text: str = "",
) -> int:
    """Erase the words of audit events of ``workspace`` (their reason, and their
    details if the text is in them) that are about ``target_ids`` of
    ``target_type``, or that contain ``text`` (case-insensitive). The events stay:
    who decided what, and when, is kept. Returns how many events changed."""
    match = Q()
    if target_type and target_ids:
        match |= Q(target_type=target_type, target_id__in=[str(pk) for pk in target_ids])
    if text:
        match |= Q(reason__icontains=text)
    if not match:
        return 0
    events = AuditEvent.objects.filter(match, workspace=workspace)
    changed = events.exclude(reason__in=["", REASON_ERASED]).update(reason=REASON_ERASED)
    if text:
        # Details never carry content by rule; a name someone wrote may still be there.
        changed += (
            AuditEvent.objects.filter(workspace=workspace)
            .alias(details_text=Cast("details", TextField()))
            .filter(details_text__icontains=text)
            .update(details={"erased": True})
        )
    return changed
