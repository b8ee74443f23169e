"""Reconcile: pairs through the HNSW index, judged once, acted on without ever raising
confidence; people settle what touches their items. Jobs run on real workers."""

from __future__ import annotations

import os
import signal
import time

import pytest

from memory.core.actors import Actor
from memory.knowledge.recall import knowledge_recall
from memory.lessons.posted_evidence import evidence_record
from memory.maintenance.judge import HeuristicJudge, JudgeUnavailable
from memory.maintenance.reconcile import candidate_batch, reconcile_workspace
from memory.models import (
    AuditEvent,
    ConfidenceChange,
    Evidence,
    JobRun,
    Knowledge,
    PairDecision,
    ReviewItem,
)
from memory.privacy.erasure import erasure_execute
from memory.privacy.selection import Selector
from memory.tasks import reconcile
from tests.factories.identity import WorkspaceFactory
from tests.factories.knowledge import KnowledgeFactory
from tests.factories.maintenance import NEW_PG, OLD_PG, plant, state

pytestmark = pytest.mark.django_db


def test_it_finds_candidates_through_the_index_within_one_context(workspace):
    items = plant(workspace)
    KnowledgeFactory(workspace=workspace, content=OLD_PG, context="other")
    seeds, pairs = candidate_batch(
        workspace_id=workspace.pk, after=None, batch=100, neighbours=4, threshold=0.85
    )
    assert [pk for _, pk in seeds][0] == max(pk for _, pk in seeds)  # newest first
    found = {(p.a_id, p.b_id) for p in pairs}
    key = lambda a, b: (min(a.pk, b.pk), max(a.pk, b.pk))  # noqa: E731
    assert key(items["old_pg"], items["new_pg"]) in found
    assert key(items["dup_strong"], items["dup_weak"]) in found
    assert all(items["bystander"].pk not in pair for pair in found)
    assert len(found) == 3 and all(p.similarity > 0.85 for p in pairs)  # never the other context


def test_it_resolves_the_planted_pairs_without_raising_confidence(workspace):
    items = plant(workspace)
    before = {k.pk: k.confidence for k in Knowledge.objects.filter(workspace=workspace)}
    counts = reconcile_workspace(workspace=workspace, judge=HeuristicJudge())
    assert counts["contradictions_superseded"] == counts["duplicates_merged"] == 1
    assert counts["sent_to_review"] == 1
    old, new = (Knowledge.objects.get(pk=items[k].pk) for k in ("old_pg", "new_pg"))
    # The newer agent item supersedes the older, whose confidence fell through the ledger.
    assert old.superseded_by_id == new.pk and new.superseded_by_id is None
    assert old.confidence == pytest.approx(0.6 * 0.7)
    change = ConfidenceChange.objects.get(target_type="knowledge", target_id=old.pk)
    assert (change.cause, change.before, change.after) == ("reconcile", 0.6, old.confidence)
    hits = knowledge_recall(workspace=workspace, query="staging PostgreSQL version").hits
    assert [h.content for h in hits if "PostgreSQL" in h.content] == [NEW_PG]
    # The duplicate merged into the stronger one, which kept its confidence.
    weak, strong = (Knowledge.objects.get(pk=items[k].pk) for k in ("dup_weak", "dup_strong"))
    assert weak.superseded_by_id == strong.pk and strong.metadata["merged_from"] == [weak.pk]
    # The person's item was not touched: a reviewer decides.
    review = ReviewItem.objects.get(workspace=workspace)
    assert {review.a_id, review.b_id} == {items["person"].pk, items["agent_vs_person"].pk}
    assert review.details["verdict"] == "contradiction"
    for key in ("person", "agent_vs_person"):
        assert Knowledge.objects.get(pk=items[key].pk).superseded_by_id is None
    # No confidence went up; the only change is the reconcile ledger row.
    after = {k.pk: k.confidence for k in Knowledge.objects.filter(workspace=workspace)}
    assert all(after[pk] <= before[pk] for pk in before)
    assert ConfidenceChange.objects.filter(workspace=workspace).count() == 1
    # Each decision is in both items' history.
    for key in ("old_pg", "new_pg"):
        event = AuditEvent.objects.get(target_id=str(items[key].pk), action="reconcile.decide")
        assert event.details["verdict"] == "contradiction"
        assert event.details["action"] == "superseded" and event.details["kept"] == new.pk


def test_it_changes_nothing_when_run_again(workspace):
    plant(workspace)
    reconcile_workspace(workspace=workspace, judge=HeuristicJudge())
    first = state(workspace)
    events = AuditEvent.objects.count()
    counts = reconcile_workspace(workspace=workspace, judge=HeuristicJudge())
    assert state(workspace) == first and AuditEvent.objects.count() == events
    assert counts["judged"] == 0


class _Down:
    name = "chat:down"

    def judge(self, a, b):
        raise JudgeUnavailable("down")


def test_it_leaves_pairs_unjudged_when_the_judge_is_down(workspace):
    plant(workspace)
    counts = reconcile_workspace(workspace=workspace, judge=_Down())
    assert counts["unjudged"] == 3 and counts["judged"] == 0  # all three wait for the judge
    assert PairDecision.objects.filter(workspace=workspace).count() == 0
    assert Knowledge.objects.filter(workspace=workspace, superseded_by__isnull=False).count() == 0


def test_it_keeps_sensitive_pairs_on_the_built_in_judge(workspace):
    a = KnowledgeFactory(workspace=workspace, content=OLD_PG, sensitive=True)
    b = KnowledgeFactory(workspace=workspace, content=NEW_PG)
    counts = reconcile_workspace(workspace=workspace, judge=_Down())
    assert counts["contradictions_superseded"] == 1
    decision = PairDecision.objects.get(workspace=workspace)
    assert decision.judge == "heuristic" and {decision.a_id, decision.b_id} == {a.pk, b.pk}


@pytest.mark.parametrize("flag", ["sealed", "pinned"])
def test_it_sends_sealed_and_pinned_pairs_to_review(workspace, flag):
    KnowledgeFactory(workspace=workspace, content=OLD_PG, **{flag: True})
    KnowledgeFactory(workspace=workspace, content=NEW_PG)
    reconcile_workspace(workspace=workspace, judge=HeuristicJudge())
    assert ReviewItem.objects.filter(workspace=workspace, status="open").count() == 1
    assert not Knowledge.objects.filter(workspace=workspace, superseded_by__isnull=False).exists()


# --- real workers ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_it_runs_on_a_real_worker_and_twice_is_safe(celery_worker_process):
    workspace = WorkspaceFactory()
    plant(workspace)
    run = JobRun.objects.get(pk=reconcile.delay(None, workspace.pk).get(timeout=90))
    assert (run.kind, run.status, run.workspace_id) == ("reconcile", "succeeded", workspace.pk)
    assert run.counts["contradictions_superseded"] == 1 and run.progress_done == 7
    first = state(workspace)
    second = JobRun.objects.get(pk=reconcile.delay(None, workspace.pk).get(timeout=90))
    assert second.counts["judged"] == 0 and state(workspace) == first


@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_serialize(celery_worker_process):
    workspace = WorkspaceFactory()
    plant(workspace)
    for result in [reconcile.delay(None, workspace.pk) for _ in range(2)]:
        result.get(timeout=90)  # a skipped run answers None
    runs = JobRun.objects.filter(kind="reconcile", workspace=workspace)
    assert sorted(r.status for r in runs) in (
        ["skipped", "succeeded"],
        ["succeeded", "succeeded"],
    )
    assert PairDecision.objects.filter(workspace=workspace).count() == 3
    assert ReviewItem.objects.filter(workspace=workspace).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_killed_run_resumes_to_the_state_of_one_clean_run(celery_worker_process, slow_worker):
    clean, killed = WorkspaceFactory(), WorkspaceFactory()
    plant(clean)
    plant(killed)
    reconcile.delay(None, clean.pk).get(timeout=90)

    queue = f"kill-{os.getpid()}"
    worker = slow_worker(queue)
    try:
        run = JobRun.objects.create(kind="reconcile", workspace=killed)
        reconcile.apply_async(args=[run.pk, killed.pk], queue=queue)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            run.refresh_from_db()
            if run.progress_done >= 3:
                break
            time.sleep(0.1)
        assert 3 <= run.progress_done < 7, "the run should be part-way through"
    finally:
        os.killpg(worker.pid, signal.SIGKILL)  # no cleanup, no lock release but the socket's
        worker.wait(timeout=20)
    run.refresh_from_db()
    assert run.status == "running" and run.result["cursor"]["workspace"] == killed.pk

    resumed = JobRun.objects.get(pk=reconcile.delay(None, killed.pk).get(timeout=90))
    assert resumed.status == "succeeded" and resumed.result["resumed_from"] == run.pk
    assert resumed.counts["items_scanned"] < 7  # it continued from the cursor
    run.refresh_from_db()
    assert run.status == "failed" and "resumed" in run.error
    assert state(killed) == state(clean)


def test_a_merged_duplicate_hands_over_its_uses_and_evidence(workspace):
    items = plant(workspace)
    weak, strong = items["dup_weak"], items["dup_strong"]
    Knowledge.objects.filter(pk=weak.pk).update(use_count=3)
    evidence_record(
        workspace=workspace,
        actor=Actor.system("test"),
        evidence_id="ev-weak",
        kind="self_report",
        target_type="knowledge",
        target_id=weak.pk,
    )
    uses = Knowledge.objects.get(pk=weak.pk).use_count  # 3, and the self-report's use
    reconcile_workspace(workspace=workspace, judge=HeuristicJudge())
    strong.refresh_from_db()
    assert uses >= 3 and strong.use_count == uses and strong.confidence == 0.7
    assert Evidence.objects.get(evidence_id="ev-weak").target_id == strong.pk


def test_it_is_on_beat():
    from cairn import settings as prod_settings

    schedule = prod_settings.CELERY_BEAT_SCHEDULE
    assert schedule["reconcile"]["task"] == "memory.tasks.reconcile"
    assert schedule["consolidate"]["task"] == "memory.tasks.consolidate"


def test_erasing_a_side_takes_its_decisions_and_review_items(workspace):
    items = plant(workspace)
    reconcile_workspace(workspace=workspace, judge=HeuristicJudge())
    erasure_execute(workspace=workspace, selector=Selector(kind="text", value="cairn-backups"))
    gone = {items["person"].pk, items["agent_vs_person"].pk}
    left = PairDecision.objects.filter(workspace=workspace)
    assert left.count() == 2 and not any({d.a_id, d.b_id} & gone for d in left)
    assert not ReviewItem.objects.filter(workspace=workspace).exists()
