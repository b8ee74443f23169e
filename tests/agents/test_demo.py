"""The demo workspace is loaded through the real API and populates every queue."""

import pytest
from django.core.management import call_command

from memory.models import (
    ConversationTurn,
    JobRun,
    Knowledge,
    Lesson,
    Outcome,
    ReviewItem,
    SituationLesson,
    SkillDelta,
    TurnRecovery,
    Workspace,
)

pytestmark = pytest.mark.django_db


def test_it_loads_once_and_populates_the_queues(capsys):
    call_command("cairn_demo")
    workspace = Workspace.objects.get(name="demo")
    assert workspace.is_demo
    deltas = SkillDelta.objects.filter(workspace=workspace)
    assert deltas.filter(status="staged").count() >= 2
    assert deltas.filter(status="quarantined").count() == 1
    assert deltas.filter(status="orphaned").count() == 3
    # Learned from a failed-then-succeeded pair, then confirmed at the next session.
    install = Lesson.objects.get(
        workspace=workspace, text__icontains="Use `uv pip-install` instead of `pip install`"
    )
    assert install.state == "active"
    assert install.confidence > 0.5
    # The environment flip: the old compose lesson was superseded by the reversed one.
    flipped = Lesson.objects.get(
        workspace=workspace,
        text__icontains="Use `docker compose-v1` instead of `docker compose-v2`",
    )
    assert flipped.state == "active"
    assert Lesson.objects.filter(workspace=workspace, state="claimed").count() == 1
    # Six coding turns, the mail harness's passed outcome an outcome_evidence delta cites,
    # and the headless turn blocked on gh.
    assert Outcome.objects.filter(workspace=workspace).count() == 8
    cited = SkillDelta.objects.get(workspace=workspace, provenance_source="outcome_evidence")
    assert cited.trust == "trusted" and cited.status == "staged"
    assert Outcome.objects.get(pk=cited.provenance["outcomes"][0]).channel == "harness"
    # A headless turn blocked on a logged-out gh: refused sign-in, then escalated.
    blocked = TurnRecovery.objects.get(workspace=workspace, turn_id="demo-gh-1")
    assert blocked.escalated and blocked.refused_calls == 1
    assert (blocked.steps_to_escalate, round(blocked.seconds_to_escalate)) == (3, 94)
    assert SituationLesson.objects.filter(workspace=workspace, subject="gh").count() == 1
    knowledge = Knowledge.objects.filter(workspace=workspace, status="active")
    assert knowledge.filter(category="reminder", due_at__isnull=False).count() == 1
    assert knowledge.filter(category="error", operation_key="npm:ci").count() == 1
    assert knowledge.filter(sensitive=True).count() == 1
    assert knowledge.exclude(embedding=None).count() == knowledge.count()

    call_command("cairn_demo")
    assert "already loaded" in capsys.readouterr().out
    assert Outcome.objects.filter(workspace=workspace).count() == 8


def test_it_leaves_a_contradiction_to_settle_and_a_consolidated_session():
    call_command("cairn_demo")
    workspace = Workspace.objects.get(name="demo")
    item = ReviewItem.objects.get(workspace=workspace, status="open")
    sides = Knowledge.objects.filter(pk__in=[item.a_id, item.b_id])
    assert sorted(k.source for k in sides) == ["agent", "user"]
    assert all("Production deploys" in k.content for k in sides)
    newer = Knowledge.objects.get(workspace=workspace, content__contains="PostgreSQL 16")
    older = Knowledge.objects.get(workspace=workspace, content__contains="PostgreSQL 14")
    assert older.superseded_by_id == newer.pk
    summary = Knowledge.objects.get(workspace=workspace, source="consolidation")
    assert summary.category == "note" and summary.metadata["sessions"] == ["demo-billing-move"]
    assert not ConversationTurn.objects.filter(
        workspace=workspace, session_id="demo-billing-move", consolidated_at__isnull=True
    ).exists()
    kinds = set(JobRun.objects.filter(workspace=workspace).values_list("kind", "status"))
    assert {("reconcile", "succeeded"), ("consolidate", "succeeded")} <= kinds
