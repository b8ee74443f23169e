"""Consolidate: old sessions become a summary note (the shape erasure follows) and
extracted items through the normal write path; nothing sensitive enters them."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from memory.core.actors import Actor
from memory.knowledge.remember import knowledge_remember
from memory.maintenance.consolidate import consolidate_run, sessions_due
from memory.models import ConversationTurn, JobRun, Knowledge
from memory.privacy.erasure import erasure_execute
from memory.privacy.selection import Selector
from memory.tasks import consolidate
from tests.factories.identity import WorkspaceFactory
from tests.factories.knowledge import TurnFactory

pytestmark = pytest.mark.django_db

SCRIPT = [
    ("user", "We are moving the billing service to the new cluster this sprint."),
    ("assistant", "I will check the billing service deployment manifests for the new cluster."),
    ("user", "I prefer blue-green deploys for the billing service."),
    ("assistant", "The manifests pin the billing image to version 4.2 on the old cluster."),
    ("user", "Use the token ghp_abcdefghijklmnopqrstuvwxyz0123456789 to pull the images."),
    ("assistant", "Blue-green deploys for billing are now configured on the new cluster."),
]


def session(
    workspace, session_id: str, *, days: float = 20, turns=SCRIPT, channel: str = "harness"
) -> list:
    """A session's turns, recorded by the harness unless ``channel`` says otherwise (what
    is derived from an agent token's turns stays the agent's word)."""
    at = timezone.now() - timedelta(days=days)
    return [
        TurnFactory(
            workspace=workspace,
            session_id=session_id,
            role=role,
            content=text,
            turn_index=i,
            created_at=at + timedelta(minutes=i),
            channel=channel,
        )
        for i, (role, text) in enumerate(turns)
    ]


def run_for(workspace) -> JobRun:
    run = JobRun.objects.create(kind="consolidate", workspace=workspace)
    run.counts = consolidate_run(run=run)
    return run


def test_it_picks_sessions_idle_two_weeks_with_five_turns(workspace):
    session(workspace, "old")
    session(workspace, "recent", days=3)
    session(workspace, "short", turns=SCRIPT[:4])
    assert sessions_due(workspace=workspace) == ["old"]


def test_an_old_session_becomes_a_summary_and_extracted_items(workspace):
    turns = session(workspace, "sess-billing")
    run = run_for(workspace)
    assert run.counts["sessions"] == run.counts["summaries"] == 1
    summary = Knowledge.objects.get(workspace=workspace, source="consolidation")
    assert summary.category == "note" and summary.embedding is not None
    assert summary.metadata == {
        "sessions": ["sess-billing"],
        "turn_ids": [t.pk for t in turns],
    }
    assert summary.content.startswith("Session sess-billing (6 turns")
    assert "billing" in summary.content
    assert "ghp_" not in summary.content  # a credential never enters a summary
    extracted = Knowledge.objects.get(workspace=workspace, source="extract")
    assert extracted.content == "I prefer blue-green deploys for the billing service."
    assert extracted.category == "preference"
    # Its words came from a turn, and it says so (provenance: served as quoted).
    assert extracted.metadata == {
        "sessions": ["sess-billing"],
        "turn_ids": [turns[2].pk],
        "quoted_from": f"turn:{turns[2].pk}",
    }
    assert not ConversationTurn.objects.filter(consolidated_at__isnull=True).exists()


def test_it_changes_nothing_when_run_again(workspace):
    session(workspace, "s1")
    run_for(workspace)
    rows = sorted(Knowledge.objects.values_list("pk", "content", "updated_at"))
    again = run_for(workspace)
    assert again.counts["sessions"] == 0 and again.progress_total == 0
    assert sorted(Knowledge.objects.values_list("pk", "content", "updated_at")) == rows


def test_sensitive_items_of_the_session_stay_out_of_the_summary(workspace):
    turns = [(r, t) for r, t in SCRIPT if "token" not in t]
    turns.append(("user", "My doctor said the knee surgery is scheduled for March."))
    session(workspace, "s1", turns=turns * 2)
    knowledge_remember(
        workspace=workspace,
        actor=Actor.system("test"),
        content="The knee surgery is scheduled for March.",
        sensitive=True,
        metadata={"session_id": "s1"},
    )
    run_for(workspace)
    for row in Knowledge.objects.filter(source__in=["consolidation", "extract"]):
        assert "surgery" not in row.content


OTHER = [
    ("user", "Can you draft the quarterly report for the marketing team?"),
    ("assistant", "The quarterly marketing report draft covers campaigns and spend."),
    ("user", "Add a section on the spring campaign results please."),
    ("assistant", "The spring campaign section shows a rise in newsletter signups."),
    ("user", "Thanks, send the report draft to the marketing lead."),
]


def test_erasure_by_session_removes_the_summary_again(workspace):
    session(workspace, "sess-erase")
    session(workspace, "sess-keep", turns=OTHER)
    run_for(workspace)
    assert Knowledge.objects.filter(source="consolidation").count() == 2
    erasure_execute(workspace=workspace, selector=Selector(kind="session", value="sess-erase"))
    left = Knowledge.objects.filter(workspace=workspace, source__in=["consolidation", "extract"])
    assert [row.metadata["sessions"] for row in left] == [["sess-keep"]]


def test_each_session_s_summary_names_it_and_erasure_finds_it(workspace):
    # Dedup keeps two sessions' summaries apart (they name different sessions); had
    # they merged, the merge keeps both sessions (tests/memory/knowledge/test_dedup.py).
    session(workspace, "s1")
    session(workspace, "s2")
    run_for(workspace)
    summaries = Knowledge.objects.filter(source="consolidation")
    named = sorted(s for summary in summaries for s in summary.metadata["sessions"])
    assert named == ["s1", "s2"]
    assert sum(len(summary.metadata["turn_ids"]) for summary in summaries) == 12
    erasure_execute(workspace=workspace, selector=Selector(kind="session", value="s1"))
    left = Knowledge.objects.filter(source="consolidation")
    assert [summary.metadata["sessions"] for summary in left] == [["s2"]]


def test_the_chat_model_writes_the_summary_when_configured(workspace, model):
    model.answers.append((200, "The user moved billing to the new cluster with blue-green."))
    session(workspace, "s1")
    run_for(workspace)
    summary = Knowledge.objects.get(source="consolidation")
    assert summary.content.endswith("The user moved billing to the new cluster with blue-green.")
    sent = model.seen[0][2]["messages"][1]["content"]
    assert "ghp_" not in sent  # credentials never leave for the model either


def test_a_silent_model_leaves_the_session_for_the_next_run(workspace, model):
    model.answers.append((503, "busy"))
    session(workspace, "s1")
    run = run_for(workspace)
    assert run.counts["left_for_model"] == 1 and run.counts["summaries"] == 0
    assert not Knowledge.objects.exists()
    assert ConversationTurn.objects.filter(consolidated_at__isnull=True).count() == 6


# --- real workers ---------------------------------------------------------------------


def _state(workspace) -> list:
    return sorted(
        (k.source, k.category, k.content, tuple(k.metadata["sessions"]))
        for k in Knowledge.objects.filter(workspace=workspace)
    )


@pytest.mark.django_db(transaction=True)
def test_it_runs_on_a_real_worker_and_twice_is_safe(celery_worker_process):
    workspace = WorkspaceFactory()
    session(workspace, "s1")
    run = JobRun.objects.get(pk=consolidate.delay(None, workspace.pk).get(timeout=90))
    assert (run.kind, run.status, run.counts["summaries"]) == ("consolidate", "succeeded", 1)
    assert run.progress_done == run.progress_total == 1
    first = _state(workspace)
    second = JobRun.objects.get(pk=consolidate.delay(None, workspace.pk).get(timeout=90))
    assert second.counts["sessions"] == 0 and _state(workspace) == first


@pytest.mark.django_db(transaction=True)
def test_a_killed_run_resumes_to_the_state_of_one_clean_run(celery_worker_process, slow_worker):
    clean, killed = WorkspaceFactory(), WorkspaceFactory()
    for workspace in (clean, killed):
        for n in range(5):
            session(workspace, f"s{n}", turns=[(r, f"{t} (session {n})") for r, t in SCRIPT])
    consolidate.delay(None, clean.pk).get(timeout=120)

    queue = f"kill-consolidate-{os.getpid()}"
    worker = slow_worker(queue)
    try:
        run = JobRun.objects.create(kind="consolidate", workspace=killed)
        consolidate.apply_async(args=[run.pk, killed.pk], queue=queue)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            run.refresh_from_db()
            if run.progress_done >= 2:
                break
            time.sleep(0.1)
        assert 2 <= run.progress_done < 5, "the run should be part-way through"
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=20)
    resumed = JobRun.objects.get(pk=consolidate.delay(None, killed.pk).get(timeout=120))
    assert resumed.status == "succeeded" and resumed.result["resumed_from"] == run.pk
    assert resumed.counts["sessions"] < 5
    assert _state(killed) == _state(clean)
    assert not ConversationTurn.objects.filter(consolidated_at__isnull=True).exists()
