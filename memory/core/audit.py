"""The audit log: one row per decision, in the same transaction as the change."""

from __future__ import annotations

from memory.models import AuditEvent, Workspace


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
