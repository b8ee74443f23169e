"""Erasure: the one operation that really deletes (SPEC principle 4).

Learning retirement (supersede, retire, archive, reset, decay) keeps rows so
lineage stays auditable. Erasure is a separate, admin-only operation for "forget
this": it deletes the rows a selector reaches, the rows derived from them, their
vectors (columns of those rows) and cached renderings, reclaims the dead tuples,
and leaves a receipt with counts and no content. What is erased from where is
decided by one map, ``memory.privacy.datamap``; the preview and the job both read it.
The order of the job's steps is ``erasure_steps``; what it does to the table files
and the WAL afterwards is ``erasure_storage``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models.deletion import Collector
from django.utils import timezone

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.core.audit import REASON_ERASED, audit_reasons_redact, audit_record
from memory.core.jobs import job_enqueue, job_progress, job_run_create
from memory.core.locks import advisory_lock_blocking
from memory.core.secrets import refuse_secrets
from memory.core.valkey import valkey_aof_rewrite
from memory.knowledge import text_stats
from memory.models import (
    ErasureReceipt,
    ErasureSelector,
    ErasureStatus,
    JobRun,
    Workspace,
)
from memory.privacy.datamap import TABLES, Plan, followers_of, trigger_tables
from memory.privacy.erasure_steps import (
    Step,
    erasure_steps,
    idempotency_quoting,
    in_workspace,
    lineage_ids,
    quoted_copies,
)
from memory.privacy.erasure_storage import (
    REDACTED_TABLES,
    erasure_touched_tables,
    vacuum_tables,
    wal_switch,
)
from memory.privacy.exports import export_files_forget
from memory.privacy.queries import text_match
from memory.privacy.selection import ERASURE_SELECTORS, Selector, refusal, selector_from_message
from memory.privacy.tables import Table
from memory.skills.effective import effective_skill_cache_forget
from memory.webhooks.events import erasure_completed_event

logger = logging.getLogger(__name__)

# Audit events name their target as (target_type, id): the events about an erased
# row lose their reasons in the batch that deletes it.
AUDIT_TARGETS = {
    "memory.Knowledge": "knowledge",
    "memory.Lesson": "lesson",
    "memory.SkillDelta": "skill_delta",
    "memory.LearnedFact": "learned_fact",
    "memory.ReviewItem": "review_item",
    "memory.FeedbackSample": "feedback_sample",
    "memory.SituationLesson": "situation_lesson",
}
# A selector value shorter than this is not searched for in free-text reasons (a
# context named "a" would redact every reason with an "a" in it).
REASON_SEARCH_MIN_CHARS = 4


# --------------------------------------------------------------------------- preview


@dataclass
class ErasurePreview:
    selector: Selector
    counts: dict[str, int] = field(default_factory=dict)  # label → rows to delete
    recompute: dict[str, int] = field(default_factory=dict)  # label → rows rebuilt
    kept_matches: dict[str, int] = field(default_factory=dict)  # text found in kept tables

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def as_dict(self) -> dict:
        return {
            "counts": dict(sorted(self.counts.items())),
            "recompute": dict(sorted(self.recompute.items())),
            "kept_matches": dict(sorted(self.kept_matches.items())),
            "total": self.total,
        }


def erasure_preview(*, workspace: Workspace, selector: Selector) -> ErasurePreview:
    """Count what an erasure would delete, per table, without deleting anything.

    The same steps as the job, materialised as id sets: derivations, direct
    matches, lineage, rows that follow by id, rows that quote the content in
    stored responses, and foreign-key cascades (Django's own collector).
    """
    plan = Plan(workspace=workspace, selector=selector)
    ids: dict[str, set[int]] = defaultdict(set)
    owners: dict[str, set[int]] = defaultdict(set)
    for step in erasure_steps(plan):
        if step.derivation is not None and step.derivation.action == "rebuild":
            for label, pk in step.derivation.owners(plan, 10**9):
                owners[label].add(pk)
        else:
            ids[step.table.label] |= set(step.rows().values_list("pk", flat=True))
    for label in list(ids):
        table = TABLES[label]
        ids[label] = lineage_ids(table.model, table.lineage, ids[label], workspace=workspace)
    for label in list(ids):
        for follower, q in followers_of(label):
            if ids[label]:
                ids[follower.label] |= set(
                    in_workspace(follower.model, workspace)
                    .filter(q(sorted(ids[label])))
                    .values_list("pk", flat=True)
                )
    quotes: set[str] = set()
    for label, pks in ids.items():
        if pks and label != "memory.IdempotencyRecord":
            quotes |= quoted_copies(TABLES[label], pks, workspace=workspace)
    ids["memory.IdempotencyRecord"] |= set(
        idempotency_quoting(workspace, quotes).values_list("pk", flat=True)
    )
    preview = ErasurePreview(selector=selector)
    collector = Collector(using="default", origin=None)
    for label, pks in ids.items():
        if pks:
            collector.collect(in_workspace(TABLES[label].model, workspace).filter(pk__in=pks))
    counted: dict[str, set] = defaultdict(set)
    for model, instances in collector.data.items():
        counted[model._meta.label] |= {obj.pk for obj in instances}
    for qs in collector.fast_deletes:
        counted[qs.model._meta.label] |= set(qs.values_list("pk", flat=True))
    preview.counts = {label: len(pks) for label, pks in counted.items() if pks}
    for owner_label, owner_ids in owners.items():
        kept = owner_ids - counted.get(owner_label, set())
        if kept:
            preview.recompute[owner_label] = len(kept)
    if selector.kind == "text":
        preview.kept_matches = _kept_matches(workspace, selector)
    return preview


def _kept_matches(workspace: Workspace, selector: Selector) -> dict[str, int]:
    """A text match found in tables erasure keeps: shown so nobody is surprised."""

    out = {}
    for table in TABLES.values():
        if table.erasable or table.workspace_path is None or table.label == "auth.User":
            continue
        qs = table.model._default_manager.filter(**{table.workspace_path: workspace.pk})
        count = text_match(qs, selector).count()
        if count:
            out[table.label] = count
    return out


# --------------------------------------------------------------------------- request


@transaction.atomic
def erasure_request(
    *,
    workspace: Workspace,
    selector: Selector,
    confirm,
    actor: Actor,
    reason: str = "",
) -> ErasureReceipt:
    """Queue an erasure: typed confirmation, a receipt, a job run, the task on commit.

    1. ``confirm`` must be the workspace's name, typed (422 naming ``confirm``).
    2. The receipt and job run keep the selector's digest form only; the value
       waits in an ErasureSelector row that the job deletes when it ends (the
       broker message carries the run id only).
    3. The request is audited before anything is deleted.
    """
    if selector.kind not in ERASURE_SELECTORS:
        raise refusal("selector", f"{selector.kind} is not an erasure selector.")
    if not isinstance(confirm, str) or confirm.strip() != workspace.name:
        raise ApplicationError(
            f"Type the workspace name ({workspace.name}) in confirm to erase: erasure deletes "
            "for good and cannot be undone.",
            code="confirmation_required",
            fields={"confirm": [f"must be {workspace.name!r}"]},
        )
    refuse_secrets({"reason": reason or ""})  # kept on the receipt and in the audit log
    form = selector.receipt()
    run = job_run_create(kind="erasure", workspace=workspace, params=form, requested_by=actor.label)
    receipt = ErasureReceipt.objects.create(
        workspace=workspace,
        workspace_name=workspace.name,
        job_run=run,
        requested_by=actor.label[:200],
        reason=(reason or "")[:500],
        selector=form,
    )
    audit_record(
        workspace=workspace,
        actor=actor.label,
        action="erasure.request",
        target_type="erasure_receipt",
        target_id=receipt.pk,
        reason=reason,
        details={"selector": form, "job_run": run.pk},
    )
    # The value waits in a row the job deletes, never in the broker message.
    ErasureSelector.objects.create(job_run=run, kind=selector.kind, value=selector.value)

    def refused():
        ErasureSelector.objects.filter(job_run=run).delete()
        ErasureReceipt.objects.filter(pk=receipt.pk).update(
            status=ErasureStatus.FAILED, finished_at=timezone.now()
        )

    job_enqueue("memory.tasks.erasure_run", run, on_refused=refused)
    return receipt


# --------------------------------------------------------------------------- the job


class _Tally:
    """What the job has deleted so far. With a run, every ``add`` is written to the
    run (progress) and its receipt (counts per table) in the caller's transaction,
    i.e. the same one as the batch it counts: after a crash, the receipt says
    exactly what is gone, and a resumed job starts from those counts."""

    def __init__(self, run: JobRun | None, total: int, counts: dict[str, int] | None = None):
        self.run = run
        self.counts: dict[str, int] = defaultdict(int, counts or {})
        self.done = sum(self.counts.values())
        self.total = self.done + total
        self.agents_with_deltas: set[int] = set()
        self.rebuilt: dict[str, int] = defaultdict(int)

    def add(self, counts: dict[str, int]) -> None:
        for label, n in counts.items():
            if n:
                self.counts[label] += n
                self.done += n
        if self.run is not None:
            job_progress(run=self.run, done=min(self.done, self.total), total=self.total)
            ErasureReceipt.objects.filter(job_run=self.run).update(
                counts=dict(sorted(self.counts.items()))
            )


def _delete_batch(workspace: Workspace, table: Table, ids: set[int], tally: _Tally) -> None:
    """Delete one batch with its lineage, the rows that follow it by id, and the
    stored responses that quote it, in one transaction."""
    model = table.model
    with transaction.atomic():
        ids = lineage_ids(model, table.lineage, ids, workspace=workspace)
        ids = set(
            in_workspace(model, workspace)
            .select_for_update()
            .filter(pk__in=ids)
            .values_list("pk", flat=True)
        )
        if not ids:
            return
        quotes = quoted_copies(table, ids, workspace=workspace)
        if table.label == "memory.SkillDelta":
            tally.agents_with_deltas |= set(
                model._default_manager.filter(pk__in=ids).values_list("agent_id", flat=True)
            )
        counts: dict[str, int] = defaultdict(int)
        for follower, q in followers_of(table.label):
            _, deleted = in_workspace(follower.model, workspace).filter(q(sorted(ids))).delete()
            for label, n in deleted.items():
                counts[label] += n
        _, deleted = model._default_manager.filter(pk__in=ids).delete()
        for label, n in deleted.items():
            counts[label] += n
        if quotes:
            _, deleted = idempotency_quoting(workspace, quotes).delete()
            for label, n in deleted.items():
                counts[label] += n
        if table.label in AUDIT_TARGETS:
            # A retire or approve reason about an erased row quotes it more often than not.
            audit_reasons_redact(
                workspace=workspace, target_type=AUDIT_TARGETS[table.label], target_ids=ids
            )
        tally.add(counts)  # in the batch's transaction: counts and rows go together


def _run_step(workspace: Workspace, plan: Plan, step: Step, tally: _Tally) -> None:
    """Loop until the step's query matches nothing: never a silent first N."""
    batch = settings.CAIRN_ERASURE_BATCH
    previous: list | None = None
    derivation = step.derivation
    while True:
        if derivation is not None and derivation.action == "rebuild":
            owners = derivation.owners(plan, batch)
            if not owners:
                return
            if owners == previous:
                raise RuntimeError(f"erasure step {step.name} made no progress")
            previous = owners
            for label, pk in owners:
                with transaction.atomic():
                    tally.add(derivation.rebuild(plan=plan, label=label, pk=pk))
                tally.rebuilt[label] += 1
            continue
        ids = list(step.rows().order_by("pk").values_list("pk", flat=True)[:batch])
        if not ids:
            return
        if ids == previous:
            raise RuntimeError(f"erasure step {step.name} made no progress")
        previous = ids
        _delete_batch(workspace, step.table, set(ids), tally)


def _left(plan: Plan, step: Step) -> int:
    if step.derivation is not None and step.derivation.action == "rebuild":
        return len(step.derivation.owners(plan, 10**9))
    return step.rows().count()


def erasure_execute(
    *,
    workspace: Workspace,
    selector: Selector,
    run: JobRun | None = None,
    done: dict[str, int] | None = None,
) -> dict:
    """Erase everything ``selector`` reaches in ``workspace``; returns the receipt body.

    1. Preview (for the progress total), then run every step in batches until
       its query is empty: derivations, then direct matches per table.
    2. Re-check every step up to CAIRN_ERASURE_VERIFY_PASSES times for rows that
       matched while the job ran; anything still matching is reported, never hidden.
    3. Forget cached effective skills of agents whose deltas went, delete export
       files of the workspace (they may hold erased rows), VACUUM the tables
       touched (outside any transaction, on its own autocommit connection), and
       rewrite Valkey's append-only file so deleted keys leave the disk too.
    4. Audit reasons about erased rows (in each batch) and audit and receipt
       reasons that contain the selector's value lose their words; the tables
       vacuumed are every table an erasure can touch, so a resumed run vacuums
       what its killed predecessor deleted too.
    """
    plan = Plan(workspace=workspace, selector=selector)
    preview = erasure_preview(workspace=workspace, selector=selector)
    tally = _Tally(run, preview.total, done)
    steps = erasure_steps(plan)
    with advisory_lock_blocking(f"erasure:{workspace.pk}"):
        for step in steps:
            _run_step(workspace, plan, step, tally)
        # Rows that came to match while the job ran (concurrent writes) get the
        # same treatment; whatever still matches after the passes is reported.
        for _ in range(settings.CAIRN_ERASURE_VERIFY_PASSES):
            again = [step for step in steps if _left(plan, step)]
            if not again:
                break
            for step in again:
                _run_step(workspace, plan, step, tally)
        remaining: dict[str, int] = defaultdict(int)
        for step in steps:
            left = _left(plan, step)
            if left:
                remaining[step.table.label] += left

    # The text counts of erased knowledge left by trigger; folding drops the words only
    # they held (the fold is global: one at a time, it waits for a running one).
    stats_folded = text_stats.fold(wait=True) if "memory.Knowledge" in tally.counts else None

    reasons = reasons_redact(workspace=workspace, selector=selector)
    effects = {
        "reasons_redacted": reasons,
        "cache_keys": effective_skill_cache_forget(
            workspace_id=workspace.pk, agent_ids=sorted(tally.agents_with_deltas)
        ),
        "export_files": export_files_forget(
            workspace=workspace,
            erasure=(
                ErasureReceipt.objects.filter(job_run=run).values_list("pk", flat=True).first()
                if run is not None
                else None
            ),
        ),
    }
    counts = dict(sorted(tally.counts.items()))
    # Every table an erasure can touch, not only those this run counted: a resumed
    # run does not know what its killed predecessor deleted or rebuilt.
    vacuum = vacuum_tables(
        labels=erasure_touched_tables(),
        rewrite=[
            *counts,
            *tally.rebuilt,
            *(REDACTED_TABLES if reasons else ()),
            *(trigger_tables() if stats_folded is not None else ()),
        ],
    )
    # Deleted cache keys stay in Valkey's append-only file until it is rewritten.
    effects["valkey_aof_rewritten"] = valkey_aof_rewrite()
    effects["vacuumed"] = sorted({*vacuum["vacuumed"], *vacuum["rewritten"]})
    effects["rewritten"] = vacuum["rewritten"]
    effects["rewrite_skipped_busy"] = vacuum["rewrite_skipped"]
    effects["vacuum_skipped_busy"] = vacuum["skipped"]
    effects["rebuilt"] = dict(sorted(tally.rebuilt.items()))
    if stats_folded is not None:
        effects["text_stats_folded"] = stats_folded["folded"]
    return {
        "preview": preview.as_dict(),
        "counts": counts,
        "effects": effects,
        "remaining": dict(remaining),
    }


def reasons_redact(*, workspace: Workspace, selector: Selector) -> int:
    """Audit reasons and erasure-receipt reasons of ``workspace`` that contain the
    selector's value lose their words (this erasure's own receipt included: a reason
    such as "forget Sarah Chen's address" is itself the thing to forget)."""
    value = (selector.value or "").strip()
    if len(value) < REASON_SEARCH_MIN_CHARS:
        return 0
    with transaction.atomic():
        changed = audit_reasons_redact(workspace=workspace, text=value)
        changed += ErasureReceipt.objects.filter(
            workspace=workspace, reason__icontains=value
        ).update(reason=REASON_ERASED)
    return changed


def receipt_digest(receipt: ErasureReceipt) -> str:
    body = {
        "id": receipt.pk,
        "workspace": receipt.workspace_name,
        "requested_by": receipt.requested_by,
        "requested_at": receipt.requested_at.isoformat() if receipt.requested_at else None,
        "finished_at": receipt.finished_at.isoformat() if receipt.finished_at else None,
        "selector": receipt.selector,
        "counts": receipt.counts,
        "effects": receipt.effects,
        "remaining": receipt.remaining,
    }
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def erasure_job(*, run: JobRun, message: dict | None = None) -> dict:
    """The task body: mark the receipt running, erase, seal the receipt, audit.

    Resumable: a run whose worker died is sent again (``memory.tasks.jobs_reap``);
    the steps select what still matches, and the receipt's counts so far (written
    with each batch) are carried on. The selector row goes when the job ends.
    """
    workspace = run.workspace
    receipt = ErasureReceipt.objects.get(job_run=run)
    ErasureReceipt.objects.filter(pk=receipt.pk).update(
        status=ErasureStatus.RUNNING, started_at=receipt.started_at or timezone.now()
    )
    if message is None:  # the value waits in its row (older messages carried it)
        pending = ErasureSelector.objects.get(job_run=run)
        message = {"kind": pending.kind, "value": pending.value}
    selector = selector_from_message(workspace=workspace, message=message)
    done_before = dict(receipt.counts or {})
    try:
        body = erasure_execute(
            workspace=workspace, selector=selector, run=run, done=done_before or None
        )
    except Exception:
        ErasureSelector.objects.filter(job_run=run).delete()
        ErasureReceipt.objects.filter(pk=receipt.pk).update(
            status=ErasureStatus.FAILED, finished_at=timezone.now()
        )
        audit_record(
            workspace=workspace,
            actor="system:erasure",
            action="erasure.fail",
            target_type="erasure_receipt",
            target_id=receipt.pk,
        )
        raise
    ErasureSelector.objects.filter(job_run=run).delete()
    # Its value leaves the table file too.
    vacuum_tables(labels=["memory.ErasureSelector"], rewrite=["memory.ErasureSelector"])
    # Last, once nothing left holds the text: the WAL that recorded it is let go.
    body["effects"]["wal_switched"] = wal_switch()
    receipt.refresh_from_db()
    # A resumed run previewed only what was left: the earlier attempts' rows count too.
    preview = defaultdict(int, done_before)
    for label, n in body["preview"]["counts"].items():
        preview[label] += n
    receipt.preview = dict(sorted(preview.items()))
    receipt.counts = body["counts"]
    receipt.effects = body["effects"]
    receipt.remaining = body["remaining"]
    receipt.status = ErasureStatus.COMPLETED
    receipt.finished_at = timezone.now()
    receipt.digest = receipt_digest(receipt)
    receipt.save()
    audit_record(
        workspace=workspace,
        actor="system:erasure",
        action="erasure.complete",
        target_type="erasure_receipt",
        target_id=receipt.pk,
        details={
            "selector": receipt.selector,
            "rows": sum(receipt.counts.values()),
            "remaining": sum(receipt.remaining.values()),
            "digest": receipt.digest,
        },
    )
    erasure_completed_event(receipt=receipt)
    run.counts = receipt.counts
    run.result = {
        **(run.result or {}),  # "resumed": n, from the reaper
        "receipt": receipt.pk,
        "digest": receipt.digest,
        "remaining": receipt.remaining,
    }
    return body


def erasure_interrupted(*, run: JobRun, reason: str) -> None:
    """The reaper gave up on this run: the receipt says so (with what is gone so far)."""
    ErasureSelector.objects.filter(job_run=run).delete()
    ErasureReceipt.objects.filter(job_run=run, status__in=["queued", "running"]).update(
        status=ErasureStatus.INTERRUPTED, finished_at=timezone.now()
    )
