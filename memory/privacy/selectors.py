"""Reads for exports, erasure receipts and their job runs, scoped to one workspace."""

from __future__ import annotations

from django.db.models import QuerySet

from memory.models import Agent, ConversationTurn, ErasureReceipt, JobRun, Knowledge, Workspace

PRIVACY_JOB_KINDS = ("export", "erasure")


def _newest(qs: QuerySet, column: str, *, exclude: tuple[str, ...] = ("",)) -> str:
    value = qs.exclude(**{f"{column}__in": exclude}).order_by("-id").values_list(column, flat=True)
    return next(iter(value[:1]), "")


def erasure_examples(*, workspace: Workspace) -> dict[str, str]:
    """One real value per erasure selector kind, taken from this workspace's newest rows,
    for the form's placeholders: an example that matches something teaches the format
    better than a description. Kinds with no value yet are left out. The default
    context, "global", is never offered: erasing it would reach most of a workspace."""
    examples = {
        "agent": _newest(Agent.objects.filter(workspace=workspace), "name"),
        "entity": _newest(Knowledge.objects.filter(workspace=workspace), "entity"),
        "context": _newest(
            Knowledge.objects.filter(workspace=workspace), "context", exclude=("", "global")
        ),
        "session": _newest(ConversationTurn.objects.filter(workspace=workspace), "session_id"),
    }
    return {kind: value for kind, value in examples.items() if value}


def job_run_in_workspace(*, workspace: Workspace, pk) -> JobRun | None:
    """A run of this workspace (system-wide runs are not an admin API's business)."""
    try:
        pk = int(pk)
    except (TypeError, ValueError):
        return None
    return JobRun.objects.filter(workspace=workspace, pk=pk).first()


def export_run_list(*, workspace: Workspace) -> QuerySet[JobRun]:
    return JobRun.objects.filter(workspace=workspace, kind="export").order_by("-id")


def export_run_get(*, workspace: Workspace, pk) -> JobRun | None:
    run = job_run_in_workspace(workspace=workspace, pk=pk)
    return run if run is not None and run.kind == "export" else None


def erasure_receipt_list(*, workspace: Workspace) -> QuerySet[ErasureReceipt]:
    return ErasureReceipt.objects.filter(workspace=workspace).select_related("job_run")


def erasure_receipt_get(*, workspace: Workspace, pk) -> ErasureReceipt | None:
    try:
        pk = int(pk)
    except (TypeError, ValueError):
        return None
    return (
        ErasureReceipt.objects.filter(workspace=workspace, pk=pk).select_related("job_run").first()
    )


def erasure_receipt_for_run(*, run: JobRun) -> ErasureReceipt | None:
    return ErasureReceipt.objects.filter(workspace_id=run.workspace_id, job_run=run).first()


def receipt_body(receipt: ErasureReceipt) -> dict:
    """The receipt as the API and the certificate show it: counts and digests, no content."""
    return {
        "id": receipt.pk,
        "workspace": receipt.workspace_name,
        "status": receipt.status,
        "requested_by": receipt.requested_by,
        "reason": receipt.reason,
        "selector": receipt.selector,
        "preview": receipt.preview,
        "counts": receipt.counts,
        "rows_deleted": sum(receipt.counts.values()),
        "remaining": receipt.remaining,
        "effects": receipt.effects,
        "requested_at": receipt.requested_at,
        "started_at": receipt.started_at,
        "finished_at": receipt.finished_at,
        "digest": receipt.digest,
    }
