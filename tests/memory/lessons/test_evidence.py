"""The evidence engine: per-kind weights, clamps, the sealed floor, idempotent posted
evidence, and the ledger invariant birth + sum(after - before) == confidence."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F, Sum
from django.utils import timezone
from rest_framework.test import APIClient

from memory.lessons.decay import decay_run
from memory.lessons.evidence import confidence_apply, evidence_apply
from memory.models import ConfidenceChange, Evidence, Knowledge, Lesson, LessonState
from tests.factories.lessons import (
    KnowledgeFactory,
    LessonFactory,
    failed_payload,
    fixed_payload,
    passed_payload,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "kind, lesson_after, knowledge_after",
    [
        ("self_report", 0.5, 0.5),
        ("test_passed", 0.65, 0.65),
        ("diff_accepted", 0.65, 0.65),
        ("user_confirmed", 0.65, 0.65),
        ("contradiction", 0.25, 0.35),
    ],
)
def test_it_applies_the_weight_of_each_kind(kind, lesson_after, knowledge_after):
    lesson = LessonFactory()
    item = KnowledgeFactory(workspace=lesson.workspace)
    evidence_apply(target=lesson, kind=kind, evidence_id="e1", channel="harness")
    evidence_apply(target=item, kind=kind, evidence_id="e1", channel="harness")
    lesson.refresh_from_db()
    item.refresh_from_db()
    assert lesson.confidence == pytest.approx(lesson_after)
    assert item.confidence == pytest.approx(knowledge_after)


def test_it_records_a_self_report_but_moves_only_recency():
    lesson = LessonFactory()
    evidence_apply(target=lesson, kind="self_report", evidence_id="said-so", channel="harness")
    lesson.refresh_from_db()
    assert lesson.confidence == 0.5
    assert lesson.use_count == 1 and lesson.last_used_at is not None
    assert ConfidenceChange.objects.count() == 0


def test_it_clamps_lessons_to_between_five_and_ninety_five_percent():
    high = LessonFactory(confidence=0.9)
    low = LessonFactory(confidence=0.2, pinned=True)  # pinned: stays live to show the clamp
    evidence_apply(target=high, kind="test_passed", evidence_id="a", channel="harness")
    evidence_apply(target=low, kind="contradiction", evidence_id="b", channel="harness")
    high.refresh_from_db()
    low.refresh_from_db()
    assert (high.confidence, low.confidence) == (0.95, 0.05)


def test_it_never_pushes_a_sealed_item_below_the_recall_floor():
    lesson = LessonFactory(confidence=0.3, sealed=True)
    item = KnowledgeFactory(confidence=0.25, sealed=True)
    evidence_apply(target=lesson, kind="contradiction", evidence_id="a", channel="harness")
    evidence_apply(target=item, kind="contradiction", evidence_id="a", channel="harness")
    lesson.refresh_from_db()
    item.refresh_from_db()
    assert (lesson.confidence, item.confidence) == (0.2, 0.2)
    assert lesson.state == LessonState.ACTIVE


def test_it_writes_one_ledger_row_per_change_with_its_cause():
    lesson = LessonFactory()
    confidence_apply(
        target=lesson, new=0.7, cause="person", kind="edit", evidence_id="", channel="person"
    )
    confidence_apply(target=lesson, new=0.7, cause="person", channel="person")  # no row
    change = ConfidenceChange.objects.get()
    assert (change.target_type, change.target_id) == ("lesson", lesson.pk)
    assert (change.before, change.after, change.cause) == (0.5, 0.7, "person")
    with pytest.raises(ValueError):
        confidence_apply(target=lesson, new=0.1, cause="vibes", channel="person")


# --- POST /evidence/ ----------------------------------------------------------------------------------------


def post_evidence(harness, **body):
    payload = {"evidence_id": "ev-1", "kind": "user_confirmed", "target_type": "lesson", **body}
    return harness.post("/api/v1/evidence/", payload, format="json")


def test_it_applies_posted_evidence_once_per_id(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace)
    first = post_evidence(harness, target_id=lesson.pk)
    assert first.status_code == 201, first.json()
    assert first.json()["confidence_before"] == 0.5
    assert first.json()["confidence_after"] == pytest.approx(0.65)
    again = post_evidence(harness, target_id=lesson.pk)
    assert again.status_code == 200 and again.json() == first.json()
    lesson.refresh_from_db()
    assert lesson.confidence == pytest.approx(0.65)
    assert Evidence.objects.count() == 1


def test_it_activates_a_claimed_lesson_on_a_confirmation_but_not_on_a_self_report(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace, state="claimed", confidence=0.3)
    post_evidence(harness, evidence_id="s", kind="self_report", target_id=lesson.pk)
    lesson.refresh_from_db()
    assert lesson.state == "claimed"
    body = post_evidence(harness, evidence_id="c", kind="diff_accepted", target_id=lesson.pk).json()
    assert body["state"] == "active"


def test_it_strengthens_knowledge_through_posted_evidence(harness):
    item = KnowledgeFactory(workspace=harness.agent.workspace)
    response = post_evidence(harness, target_type="knowledge", target_id=item.pk)
    assert response.status_code == 201
    item.refresh_from_db()
    assert item.confidence == pytest.approx(0.65)


@pytest.mark.parametrize(
    "body, status, field",
    [
        ({"kind": "test_passed"}, 400, "kind"),
        ({"kind": "contradiction"}, 400, "kind"),
        ({"target_type": "skill"}, 400, "target_type"),
        ({"evidence_id": ""}, 400, "evidence_id"),
        ({"target_id": 0}, 400, "target_id"),
    ],
)
def test_it_refuses_bad_evidence(harness, body, status, field):
    lesson = LessonFactory(workspace=harness.agent.workspace)
    response = post_evidence(harness, **{"target_id": lesson.pk, **body})
    assert response.status_code == status
    assert field in response.json()["error"]["fields"]
    assert Evidence.objects.count() == 0


def test_it_refuses_evidence_for_missing_retired_or_foreign_targets(harness, make_api):
    retired = LessonFactory(
        workspace=harness.agent.workspace, state="retired", retired_by="agent", confidence=0.4
    )
    foreign = LessonFactory()
    assert post_evidence(harness, target_id=foreign.pk).status_code == 404
    assert post_evidence(harness, target_id=foreign.pk + 1000).status_code == 404
    response = post_evidence(harness, target_id=retired.pk)
    assert response.status_code == 422
    assert Evidence.objects.count() == 0  # nothing half-written
    retired.refresh_from_db()
    assert retired.confidence == 0.4


@pytest.mark.django_db(transaction=True)
def test_it_applies_posted_evidence_once_under_concurrent_retries(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace)
    body = {
        "evidence_id": "race",
        "kind": "diff_accepted",
        "target_type": "lesson",
        "target_id": lesson.pk,
    }
    barrier = threading.Barrier(10)

    def send(_):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {harness.raw_token}")
        try:
            barrier.wait()
            return client.post("/api/v1/evidence/", body, format="json").status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=10) as pool:
        statuses = sorted(pool.map(send, range(10)))
    assert statuses == [200] * 9 + [201]
    lesson.refresh_from_db()
    assert lesson.confidence == pytest.approx(0.65)
    assert ConfidenceChange.objects.filter(target_id=lesson.pk).count() == 1


# --- the ledger invariant ------------------------------------------------------------------------------------


def ledger_sum(target_type: str, target_id: int) -> float:
    total = ConfidenceChange.objects.filter(target_type=target_type, target_id=target_id).aggregate(
        total=Sum(F("after") - F("before"))
    )["total"]
    return total or 0.0


def test_it_keeps_birth_plus_ledger_equal_to_confidence_after_a_mixed_workload(harness):
    ws = harness.agent.workspace
    births: dict[tuple[str, int], float] = {}
    sealed = LessonFactory(workspace=ws, sealed=True, confidence=0.3)
    claimed = LessonFactory(workspace=ws, state="claimed", confidence=0.3, operation_key="npm:t")
    fact = KnowledgeFactory(workspace=ws, confidence=0.6)
    error = KnowledgeFactory(workspace=ws, category="error", operation_key="pytest:tests/")
    skill = KnowledgeFactory(workspace=ws, category="skill", confidence=0.8)
    for item in (fact, error, skill):
        births[("knowledge", item.pk)] = item.confidence

    def outcome(body):
        response = harness.post("/api/v1/outcomes/", body, format="json")
        assert response.status_code in (200, 201), response.json()
        return response.json()

    learned = outcome(fixed_payload("pytest:tests/", "pytest:."))["lessons_created"][0]
    refs = [
        {"type": "lesson", "id": learned},
        {"type": "lesson", "id": sealed.pk},
        {"type": "knowledge", "id": fact.pk},
        {"type": "error", "id": error.pk},
    ]
    outcome(fixed_payload("pytest:tests/", "pytest:.", in_play=refs))
    outcome(failed_payload(in_play=refs))
    outcome(failed_payload(in_play=refs))
    outcome(passed_payload(op="npm:t", in_play=[{"type": "lesson", "id": claimed.pk}]))
    for n, (kind, target_type, target_id) in enumerate(
        [
            ("diff_accepted", "lesson", learned),
            ("self_report", "lesson", claimed.pk),
            ("user_confirmed", "knowledge", skill.pk),
            ("diff_accepted", "lesson", claimed.pk),
        ]
    ):
        harness.post(
            "/api/v1/evidence/",
            {
                "evidence_id": f"mix-{n}",
                "kind": kind,
                "target_type": target_type,
                "target_id": target_id,
            },
            format="json",
        )
    decay_run(now=timezone.now() + timedelta(days=75))
    decay_run(now=timezone.now() + timedelta(days=150))

    assert ConfidenceChange.objects.filter(cause="decay").exists()
    assert ConfidenceChange.objects.filter(cause="evidence").count() >= 8
    for lesson in Lesson.objects.filter(workspace=ws):
        assert lesson.birth_confidence + ledger_sum("lesson", lesson.pk) == pytest.approx(
            lesson.confidence, abs=1e-6
        ), lesson
    for item in Knowledge.objects.filter(workspace=ws):
        assert births[("knowledge", item.pk)] + ledger_sum("knowledge", item.pk) == pytest.approx(
            item.confidence, abs=1e-6
        ), item
