"""Retention: the prune job deletes what has outlived its retention period (SPEC section 7).

=============================== ======================================
what                            kept for
=============================== ======================================
conversation turns, tool calls  CAIRN_RETENTION_RAW_DAYS (90)
finished job runs               CAIRN_RETENTION_JOB_RUNS_DAYS
audit events, erasure receipts  CAIRN_RETENTION_AUDIT_DAYS
idempotency records             CAIRN_RETENTION_IDEMPOTENCY_HOURS (24)
export files                    CAIRN_RETENTION_EXPORT_DAYS
finished webhook deliveries     CAIRN_RETENTION_WEBHOOK_DAYS (30)
=============================== ======================================

Pruning raw history is not erasure: what was learned from it (summaries,
lessons) stays. Deletes go in batches so no statement holds locks for long.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.apps import apps
from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from memory.models import (
    AuditEvent,
    DeliveryState,
    ErasureReceipt,
    IdempotencyRecord,
    JobRun,
    WebhookDelivery,
    Workspace,
)
from memory.privacy.exports import export_dir, export_files_forget


def _delete_in_batches(qs: QuerySet) -> int:
    batch = settings.CAIRN_ERASURE_BATCH
    total = 0
    while True:
        ids = list(qs.order_by("pk").values_list("pk", flat=True)[:batch])
        if not ids:
            return total
        with transaction.atomic():
            deleted, _ = qs.model._default_manager.filter(pk__in=ids).delete()
        total += deleted


def _model(label: str):
    try:
        return apps.get_model(label)
    except LookupError:
        return None


def retention_prune(*, now: datetime | None = None) -> dict[str, int]:
    """Delete rows past their retention; returns rows (and files) deleted per kind."""

    now = now or timezone.now()
    raw_before = now - timedelta(days=settings.CAIRN_RETENTION_RAW_DAYS)
    counts: dict[str, int] = {}
    turn = _model("memory.ConversationTurn")
    if turn is not None:
        counts["conversation_turns"] = _delete_in_batches(
            turn.objects.filter(created_at__lt=raw_before)
        )
    call = _model("memory.ToolCall")
    if call is not None:
        counts["tool_calls"] = _delete_in_batches(call.objects.filter(created_at__lt=raw_before))
    counts["job_runs"] = _delete_in_batches(
        JobRun.objects.filter(
            finished_at__lt=now - timedelta(days=settings.CAIRN_RETENTION_JOB_RUNS_DAYS)
        ).exclude(status__in=[JobRun.Status.QUEUED, JobRun.Status.RUNNING])
    )
    audit_before = now - timedelta(days=settings.CAIRN_RETENTION_AUDIT_DAYS)
    counts["audit_events"] = _delete_in_batches(
        AuditEvent.objects.filter(created_at__lt=audit_before)
    )
    counts["erasure_receipts"] = _delete_in_batches(
        ErasureReceipt.objects.filter(
            Q(finished_at__lt=audit_before)
            | Q(finished_at__isnull=True, requested_at__lt=audit_before)
        )
    )
    counts["idempotency_records"] = _delete_in_batches(
        IdempotencyRecord.objects.filter(
            created_at__lt=now - timedelta(hours=settings.CAIRN_RETENTION_IDEMPOTENCY_HOURS)
        )
    )
    counts["webhook_deliveries"] = _delete_in_batches(
        WebhookDelivery.objects.exclude(state=DeliveryState.PENDING).filter(
            created_at__lt=now - timedelta(days=settings.CAIRN_RETENTION_WEBHOOK_DAYS)
        )
    )
    files = 0
    export_before = now - timedelta(days=settings.CAIRN_RETENTION_EXPORT_DAYS)
    for workspace in Workspace.objects.all().only("pk", "name"):
        if export_dir(workspace).is_dir():
            files += export_files_forget(workspace=workspace, older_than=export_before)
    counts["export_files"] = files
    return counts
