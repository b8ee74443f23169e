"""Reconcile: near-duplicate and conflicting knowledge, found through the HNSW index.

For each active item (newest first, in batches, resumable by a cursor) the
index is asked for a bounded number of nearest neighbours in the same
workspace and context; pairs above ``CAIRN_RECONCILE_SIMILARITY`` cosine are
candidates. Never an all-pairs scan. Each new pair is judged once
(``PairDecision``) and acted on under Cairn's first rule, that retrieval and a
model's judgement never raise confidence:

- duplicate (both written by agents): the weaker side is superseded by the
  stronger (higher confidence, then newer); its uses and posted evidence move
  to the stronger one; no confidence changes.
- contradiction (both written by agents): the newer supersedes the older, whose
  confidence is lowered through the ledger with cause ``reconcile``.
- either verdict touching a person's, a sealed or a pinned item: a
  contradiction review item, never an automatic change.
- the model's unconfirmed word (an agent-channel item no harness report or person
  ever confirmed) never supersedes or lowers a confirmed item (written through the
  harness or by a person, or confirmed by their evidence): a newer unconfirmed
  item contradicting it goes to the contradictions queue, and of two duplicates
  the confirmed one is kept whatever the confidences.
- neutral: recorded, nothing else.

Every decision is audited on both items (pair, judge, verdict, action), so it
shows in each one's history.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory.core.audit import audit_record
from memory.core.locks import advisory_lock_blocking
from memory.core.trust import knowledge_earned_ids
from memory.knowledge.vector_search import set_vector_search
from memory.lessons.evidence import confidence_apply
from memory.maintenance.judge import HeuristicJudge, Judge, JudgeUnavailable, judge_from_settings
from memory.maintenance.runs import run_checkpoint, run_resume_cursor, run_total
from memory.models import (
    Channel,
    ConfidenceCause,
    Evidence,
    JobRun,
    Knowledge,
    KnowledgeStatus,
    PairAction,
    PairDecision,
    PairVerdict,
    ReviewItemKind,
    ReviewTargetType,
    Source,
    Workspace,
)
from memory.review.services import review_item_open

ACTOR = "system:reconcile"
COUNT_KEYS = (
    "items_scanned",
    "pairs_found",
    "already_decided",
    "judged",
    "unjudged",
    "neutral",
    "duplicates_merged",
    "contradictions_superseded",
    "sent_to_review",
)

_NEIGHBOURS_SQL = """
WITH seeds AS (
    SELECT id, embedding, context, created_at FROM memory_knowledge
    WHERE workspace_id = %(ws)s AND status = 'active' AND superseded_by_id IS NULL
      AND embedding IS NOT NULL {after}
    ORDER BY created_at DESC, id DESC
    LIMIT %(batch)s
)
SELECT s.id, s.created_at, n.id, n.distance
FROM seeds s
LEFT JOIN LATERAL (
    SELECT k.id, k.embedding <=> s.embedding AS distance
    FROM memory_knowledge k
    WHERE k.workspace_id = %(ws)s AND k.context = s.context AND k.status = 'active'
      AND k.superseded_by_id IS NULL AND k.id <> s.id
    ORDER BY k.embedding <=> s.embedding
    LIMIT %(neighbours)s
) n ON true
ORDER BY s.created_at DESC, s.id DESC, n.distance
"""


@dataclass(frozen=True)
class Candidate:
    a_id: int  # lower id first
    b_id: int
    similarity: float


def candidate_batch(
    *,
    workspace_id: int,
    after: tuple[datetime, int] | None,
    batch: int,
    neighbours: int,
    threshold: float,
) -> tuple[list[tuple[datetime, int]], list[Candidate]]:
    """One step of the scan: the next ``batch`` seeds (newest first) and their candidate
    pairs, each pair once. Returns the seeds' (created_at, id) for the cursor."""
    params = {"ws": workspace_id, "batch": batch, "neighbours": neighbours}
    where_after = ""
    if after is not None:
        where_after = "AND (created_at, id) < (%(after_at)s, %(after_id)s)"
        params.update(after_at=after[0], after_id=after[1])
    seeds: dict[int, datetime] = {}
    pairs: dict[tuple[int, int], float] = {}
    with transaction.atomic(), connection.cursor() as cursor:
        set_vector_search(cursor, ef_search=max(settings.CAIRN_RECONCILE_EF_SEARCH, neighbours))
        cursor.execute(_NEIGHBOURS_SQL.format(after=where_after), params)
        for seed_id, created_at, other_id, distance in cursor.fetchall():
            seeds[seed_id] = created_at
            if other_id is None or distance is None:
                continue
            similarity = 1.0 - float(distance)
            if similarity > threshold:
                key = (min(seed_id, other_id), max(seed_id, other_id))
                pairs[key] = max(similarity, pairs.get(key, -1.0))
    ordered = sorted(((at, pk) for pk, at in seeds.items()), reverse=True)
    return ordered, [Candidate(a, b, round(s, 6)) for (a, b), s in pairs.items()]


def _protected(item: Knowledge) -> bool:
    return item.source == Source.USER or item.sealed or item.pinned


def _confirmed(item: Knowledge) -> bool:
    """Earned (``memory.core.trust.knowledge_earned_ids``): the one definition."""
    return item.pk in knowledge_earned_ids([item.pk], workspace_id=item.workspace_id)


def _unconfirmed_agent_word(item: Knowledge) -> bool:
    return item.channel == Channel.AGENT and not _confirmed(item)


def _review(*, workspace, a, b, candidate, judgement, verdict, run, why: str) -> str:
    item, _ = review_item_open(
        workspace=workspace,
        a_type=ReviewTargetType.KNOWLEDGE,
        a_id=a.pk,
        b_type=ReviewTargetType.KNOWLEDGE,
        b_id=b.pk,
        kind=ReviewItemKind.CONTRADICTION,
        reason=f"Reconcile judged these a {verdict} ({judgement.note}); {why}",
        actor=ACTOR,
        details={
            "similarity": candidate.similarity,
            "judge": judgement.judge,
            "verdict": verdict,
        },
    )
    _record(
        workspace=workspace,
        candidate=candidate,
        judge=judgement.judge,
        verdict=verdict,
        action=PairAction.REVIEW,
        kept=None,
        run=run,
        review_item=item.pk,
    )
    return PairAction.REVIEW


def _live(item: Knowledge) -> bool:
    return item.status == KnowledgeStatus.ACTIVE and item.superseded_by_id is None


def _merge_into(*, keep: Knowledge, drop: Knowledge, now) -> None:
    """``drop`` is superseded by ``keep``; its uses and posted evidence move over.
    No confidence changes: agreeing twice is not evidence."""
    keep.use_count += drop.use_count
    if drop.last_used_at and (keep.last_used_at is None or drop.last_used_at > keep.last_used_at):
        keep.last_used_at = drop.last_used_at
    keep.sensitive = keep.sensitive or drop.sensitive
    merged = [int(x) for x in keep.metadata.get("merged_from", [])]
    keep.metadata = {**keep.metadata, "merged_from": sorted({*merged, drop.pk})}
    keep.save(update_fields=["use_count", "last_used_at", "sensitive", "metadata", "updated_at"])
    Evidence.objects.filter(
        workspace_id=keep.workspace_id, target_type="knowledge", target_id=drop.pk
    ).update(target_id=keep.pk)
    Knowledge.objects.filter(pk=drop.pk).update(superseded_by=keep, updated_at=now)


def _record(
    *,
    workspace: Workspace,
    candidate: Candidate,
    judge: str,
    verdict: str,
    action: str,
    kept: int | None,
    run: JobRun | None,
    review_item: int | None = None,
) -> None:
    PairDecision.objects.create(
        workspace=workspace,
        target_type="knowledge",
        a_id=candidate.a_id,
        b_id=candidate.b_id,
        similarity=candidate.similarity,
        judge=judge,
        verdict=verdict,
        action=action,
        kept_id=kept,
        job_run_id=run.pk if run else None,
    )
    if verdict == PairVerdict.NEUTRAL:
        return  # nothing happened to either item; the decision row is enough
    details = {
        "pair": [candidate.a_id, candidate.b_id],
        "similarity": candidate.similarity,
        "judge": judge,
        "verdict": verdict,
        "action": action,
        "kept": kept,
    }
    if review_item:
        details["review_item"] = review_item
    for pk in (candidate.a_id, candidate.b_id):
        audit_record(
            workspace=workspace,
            actor=ACTOR,
            action="reconcile.decide",
            target_type="knowledge",
            target_id=pk,
            details=details,
        )


def pair_settle(
    *, workspace: Workspace, candidate: Candidate, judge: Judge, run: JobRun | None = None
) -> str | None:
    """Judge one candidate pair and act on it; returns the action, or None when the pair
    was skipped (decided already, a side no longer live) or the judge could not answer."""
    rows = {
        k.pk: k
        for k in Knowledge.objects.filter(
            workspace=workspace, pk__in=[candidate.a_id, candidate.b_id]
        )
    }
    if len(rows) != 2 or not all(map(_live, rows.values())):
        return None
    a, b = rows[candidate.a_id], rows[candidate.b_id]
    # Sensitive content never leaves the server: the built-in judge decides those pairs.
    chosen = HeuristicJudge() if (a.sensitive or b.sensitive) else judge
    try:
        judgement = chosen.judge(a.content, b.content)  # outside the transaction: may be slow
    except JudgeUnavailable:
        return "unjudged"
    with transaction.atomic():
        locked = {
            k.pk: k
            for k in Knowledge.objects.select_for_update()
            .filter(workspace=workspace, pk__in=[a.pk, b.pk])
            .order_by("pk")
        }
        if len(locked) != 2 or not all(map(_live, locked.values())):
            return None
        a, b = locked[a.pk], locked[b.pk]
        if (a.content, b.content) != (rows[a.pk].content, rows[b.pk].content):
            return None  # edited while judged: the next run judges the new text
        if PairDecision.objects.filter(
            workspace=workspace, target_type="knowledge", a_id=a.pk, b_id=b.pk
        ).exists():
            return None
        verdict, now = judgement.verdict, timezone.now()
        common = {"workspace": workspace, "candidate": candidate, "judge": judgement.judge}
        if verdict == PairVerdict.NEUTRAL:
            _record(**common, verdict=verdict, action=PairAction.NONE, kept=None, run=run)
            return PairAction.NONE
        review = {
            "workspace": workspace,
            "a": a,
            "b": b,
            "candidate": candidate,
            "judgement": judgement,
            "verdict": verdict,
            "run": run,
        }
        if _protected(a) or _protected(b):
            return _review(
                **review,
                why="a side is written by a person, sealed or pinned, so a person decides.",
            )
        # Whose word stands: the model's unconfirmed word never displaces a confirmed one.
        claim = {k.pk: _unconfirmed_agent_word(k) for k in (a, b)}
        confirmed = {k.pk: _confirmed(k) for k in (a, b)}
        if verdict == PairVerdict.DUPLICATE:
            keep, drop = sorted(
                (a, b),
                key=lambda k: (confirmed[k.pk], k.confidence, k.created_at, k.pk),
                reverse=True,
            )
            _merge_into(keep=keep, drop=drop, now=now)
            _record(**common, verdict=verdict, action=PairAction.MERGED, kept=keep.pk, run=run)
            return PairAction.MERGED
        newer, older = sorted((a, b), key=lambda k: (k.created_at, k.pk), reverse=True)
        if claim[newer.pk] and confirmed[older.pk]:
            return _review(
                **review,
                why="the newer side is the agent's unconfirmed word and the older one was "
                "confirmed (by the harness or a person), so a person decides.",
            )
        Knowledge.objects.filter(pk=older.pk).update(superseded_by=newer, updated_at=now)
        confidence_apply(
            target=older,
            new=older.confidence * settings.CAIRN_RECONCILE_CONTRADICTION_FACTOR,
            cause=ConfidenceCause.RECONCILE,
            kind="contradiction",
            evidence_id=f"reconcile:{a.pk}~{b.pk}",
            channel=Channel.SYSTEM,
        )
        _record(**common, verdict=verdict, action=PairAction.SUPERSEDED, kept=newer.pk, run=run)
        return PairAction.SUPERSEDED


_ACTION_COUNT = {
    PairAction.NONE: "neutral",
    PairAction.MERGED: "duplicates_merged",
    PairAction.SUPERSEDED: "contradictions_superseded",
    PairAction.REVIEW: "sent_to_review",
    "unjudged": "unjudged",
}


def _decided(workspace: Workspace, candidates: list[Candidate]) -> set[tuple[int, int]]:
    ids = {c.a_id for c in candidates}
    return set(
        PairDecision.objects.filter(
            workspace=workspace, target_type="knowledge", a_id__in=ids
        ).values_list("a_id", "b_id")
    )


def reconcile_workspace(
    *,
    workspace: Workspace,
    run: JobRun | None = None,
    judge: Judge | None = None,
    cursor: dict | None = None,
    counts: dict | None = None,
    done: int = 0,
) -> dict:
    """Reconcile one workspace, batch by batch (see the module docstring).

    1. Serialize with any other reconcile of this workspace (advisory lock).
    2. Take the next batch of seeds after the cursor and their candidate pairs.
    3. Settle each pair not decided yet; checkpoint the cursor and counts.
    """
    judge = judge or judge_from_settings()
    counts = counts if counts is not None else dict.fromkeys(COUNT_KEYS, 0)
    after = None
    if cursor and cursor.get("workspace") == workspace.pk:
        after = (parse_datetime(cursor["created_at"]), int(cursor["id"]))
    budget = settings.CAIRN_RECONCILE_MAX_PAIRS
    with advisory_lock_blocking(f"reconcile:workspace:{workspace.pk}"):
        while True:
            seeds, candidates = candidate_batch(
                workspace_id=workspace.pk,
                after=after,
                batch=settings.CAIRN_RECONCILE_BATCH,
                neighbours=settings.CAIRN_RECONCILE_NEIGHBOURS,
                threshold=settings.CAIRN_RECONCILE_SIMILARITY,
            )
            if not seeds:
                break
            counts["items_scanned"] += len(seeds)
            counts["pairs_found"] += len(candidates)
            decided = _decided(workspace, candidates)
            for candidate in sorted(candidates, key=lambda c: -c.similarity):
                if (candidate.a_id, candidate.b_id) in decided:
                    counts["already_decided"] += 1
                    continue
                if counts["judged"] >= budget:
                    counts["unjudged"] += 1
                    continue
                action = pair_settle(workspace=workspace, candidate=candidate, judge=judge, run=run)
                if action is None:
                    continue
                if action != "unjudged":
                    counts["judged"] += 1
                counts[_ACTION_COUNT[action]] += 1
            after = seeds[-1]
            done += len(seeds)
            if run is not None:
                step = {
                    "workspace": workspace.pk,
                    "created_at": after[0].isoformat(),
                    "id": after[1],
                }
                run_checkpoint(run=run, cursor=step, counts=counts, done=done)
    return counts


def reconcile_run(*, run: JobRun, judge: Judge | None = None) -> dict:
    """The reconcile job: one workspace (``run.workspace``) or all, resumable."""
    cursor = run_resume_cursor(run=run)
    workspaces = Workspace.objects.order_by("pk")
    if run.workspace_id:
        workspaces = workspaces.filter(pk=run.workspace_id)
    live = Knowledge.objects.filter(
        status=KnowledgeStatus.ACTIVE, superseded_by__isnull=True, embedding__isnull=False
    )
    if run.workspace_id:
        live = live.filter(workspace_id=run.workspace_id)
    run_total(run=run, total=live.count())
    counts = dict.fromkeys(COUNT_KEYS, 0)
    done = 0
    start_at = cursor.get("workspace") if cursor else None
    for workspace in workspaces:
        if start_at is not None and workspace.pk < start_at:
            continue
        counts = reconcile_workspace(
            workspace=workspace, run=run, judge=judge, cursor=cursor, counts=counts, done=done
        )
        done = run.progress_done
        cursor = None
    run.result = {**(run.result or {}), "cursor": None}
    return counts
