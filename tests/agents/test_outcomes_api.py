"""POST /api/v1/outcomes/ end to end: verdict, idempotency, attribution, privacy."""

from __future__ import annotations

import hashlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.apps import apps

from memory.models import (
    ConfidenceChange,
    Lesson,
    LessonEvidence,
    LessonSource,
    LessonState,
    Outcome,
)
from tests.factories.lessons import (
    BLOG,
    KnowledgeFactory,
    LessonFactory,
    check,
    digest,
    failed_payload,
    fixed_payload,
    outcome_payload,
    passed_payload,
    step,
)

URL = "/api/v1/outcomes/"


def post(harness, body):
    return harness.post(URL, body, format="json")


def ref(lesson):
    return {"type": "lesson", "id": lesson.pk}


# --- the verdict and the response ---------------------------------------------------------------


def test_it_records_an_outcome_and_answers_201(harness):
    response = post(harness, passed_payload())
    assert response.status_code == 201, response.json()
    body = response.json()
    assert set(body) >= {"id", "passed", "confirmed", "contradicted", "lessons_created"}
    assert body["passed"] is True
    outcome = Outcome.objects.get(pk=body["id"])
    assert outcome.agent == harness.agent
    assert outcome.project_digest == digest()
    assert outcome.passed is True


def test_it_ignores_the_clients_own_passed(harness):
    body = failed_payload(passed=True)
    response = post(harness, body)
    assert response.status_code == 201
    assert response.json()["passed"] is False
    outcome = Outcome.objects.get(pk=response.json()["id"])
    assert outcome.passed is False
    assert outcome.reported_passed is True  # kept for review, never used as truth


def test_it_answers_null_when_nothing_was_checked(harness):
    response = post(harness, outcome_payload(approach=[step("edit:a", "a", "ok", 1, True)]))
    assert response.json()["passed"] is None


def test_it_does_not_pass_a_test_that_ran_before_the_last_edit(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace, operation_key="pytest:.")
    body = outcome_payload(
        approach=[
            step("pytest:.", "tests", "ok", 1),
            step("edit:cart.py", "cart.py", "ok", 3, mutated=True),
        ],
        checks=[check(2, 0)],
        in_play=[ref(lesson)],
    )
    response = post(harness, body)
    assert response.json()["passed"] is False
    lesson.refresh_from_db()
    assert lesson.confidence == 0.5  # a stale pass confirms nothing


def test_it_hashes_the_goal_and_never_stores_it(harness):
    goal = "Refactor the invoice module for ACME-SECRET-CLIENT"
    response = post(harness, passed_payload(goal=goal))
    outcome = Outcome.objects.get(pk=response.json()["id"])
    assert outcome.goal_digest == hashlib.sha256(goal[:200].encode()).hexdigest()
    assert "ACME-SECRET-CLIENT" not in json.dumps(list(Outcome.objects.values()), default=str)


def test_it_stores_no_project_path_in_any_column(harness):
    secret = "/home/alice/clients/very-secret-project"
    lesson = LessonFactory(
        workspace=harness.agent.workspace,
        operation_key="pytest:.",
        project_digest=digest_for(secret),
    )
    body = fixed_payload(
        "pytest:tests/",
        "pytest:.",
        target=f"{secret}/tests",
        project_path=secret,
        in_play=[ref(lesson)],
    )
    body.pop("project_remote")
    body["checks"] = [check(3, 0, target=f"{secret}/tests")]
    response = post(harness, body)
    assert response.status_code == 201, response.json()
    assert response.json()["lessons_created"]
    dump = "".join(
        json.dumps(list(model.objects.values()), default=str)
        for model in apps.get_app_config("memory").get_models()
    )
    assert secret not in dump
    assert "very-secret-project" not in dump
    outcome = Outcome.objects.get(pk=response.json()["id"])
    assert outcome.approach[0]["target"] == "tests"


def digest_for(path):
    from memory.identity.projects import project_digest

    return project_digest(path=path)


def test_it_takes_the_project_from_the_query_string(harness):
    body = passed_payload()
    body.pop("project_remote")
    response = harness.post(f"{URL}?project_remote={BLOG}", body, format="json")
    assert response.status_code == 201
    assert Outcome.objects.get(pk=response.json()["id"]).project_digest == digest(BLOG)


# --- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, field",
    [
        ({"project_remote": ""}, "project_remote"),
        ({"outcome_id": ""}, "outcome_id"),
        (
            {"approach": [{"operation_key": "x", "outcome": "maybe", "step": 1}]},
            "approach.0.outcome",
        ),
        ({"checks": [{"kind": "fuzz", "ran": True, "exit_code": 0, "step": 1}]}, "checks.0.kind"),
        ({"checks": [{"kind": "test", "ran": True, "exit_code": 0}]}, "checks.0.step"),
        ({"in_play": [{"type": "rumour", "id": 1}]}, "in_play.0.type"),
        ({"in_play": ["lesson:abc"]}, "in_play.0.id"),
        ({"turn_index": -1}, "turn_index"),
        ({"wall_s": "fast"}, "wall_s"),
        ({"steps": 2**40}, "steps"),
        ({"session_id": "a\x00b"}, "session_id"),
    ],
)
def test_it_refuses_bad_input_naming_the_field(harness, change, field):
    response = post(harness, {**passed_payload(), **change})
    assert response.status_code == 400, response.json()
    assert field in response.json()["error"]["fields"], response.json()
    assert Outcome.objects.count() == 0


def test_it_accepts_the_in_play_shorthand(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace)
    response = post(harness, passed_payload(in_play=[f"lesson:{lesson.pk}"]))
    assert response.json()["confirmed"] == [{"type": "lesson", "id": lesson.pk}]


# --- incognito ------------------------------------------------------------------------------------------


def test_it_records_nothing_for_an_incognito_session(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace)
    body = fixed_payload("pytest:tests/", "pytest:.", incognito=True, in_play=[ref(lesson)])
    response = post(harness, body)
    assert response.status_code == 202
    assert response.json() == {"recorded": False}
    assert Outcome.objects.count() == 0
    assert Lesson.objects.count() == 1
    assert ConfidenceChange.objects.count() == 0


# --- idempotency -------------------------------------------------------------------------------------------


def test_it_answers_a_retry_with_the_same_body_and_applies_nothing_twice(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace, operation_key="pytest:.")
    body = fixed_payload("pytest:tests/", "pytest:.", in_play=[ref(lesson)])
    first = post(harness, body)
    second = post(harness, {**body, "checks": [check(3, 1)]})  # same id, different story
    assert first.status_code == 201 and second.status_code == 200
    assert second.json() == first.json()
    assert Outcome.objects.count() == 1
    assert Lesson.objects.filter(source=LessonSource.LOOP).count() == 1
    assert ConfidenceChange.objects.filter(target_id=lesson.pk).count() == 1


def test_it_keeps_outcome_ids_per_agent(harness, make_api):
    other = make_api(workspace=harness.agent.workspace, scope="harness")
    body = passed_payload()
    assert post(harness, body).status_code == 201
    assert post(other, body).status_code == 201
    assert Outcome.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_it_applies_one_outcome_under_20_concurrent_retries(live_server, harness):
    lesson = LessonFactory(workspace=harness.agent.workspace, operation_key="pytest:.")
    body = passed_payload(in_play=[ref(lesson)])
    barrier = threading.Barrier(20)

    def send(_):
        headers = {"Authorization": f"Bearer {harness.raw_token}"}
        with httpx.Client(base_url=live_server.url, headers=headers, timeout=60) as client:
            barrier.wait()
            return client.post(URL, json=body)

    with ThreadPoolExecutor(max_workers=20) as pool:
        responses = list(pool.map(send, range(20)))
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 19 + [201], [r.text for r in responses if r.status_code >= 300]
    assert len({json.dumps(r.json(), sort_keys=True) for r in responses}) == 1
    assert Outcome.objects.count() == 1
    lesson.refresh_from_db()
    assert lesson.confidence == pytest.approx(0.65)
    assert ConfidenceChange.objects.filter(target_type="lesson", target_id=lesson.pk).count() == 1
    assert LessonEvidence.objects.filter(lesson=lesson).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_self_reports_on_the_same_rows_count_every_one(live_server, agent, api):
    """Agent-token outcomes naming the same lessons and knowledge, in either order, at
    once: no deadlock, no 5xx, every one counted (the recency write comes last in
    each transaction, its rows locked in id order)."""
    workspace = agent.workspace
    first = LessonFactory(workspace=workspace, operation_key="pytest:.", state="active")
    second = LessonFactory(workspace=workspace, operation_key="pytest:.", state="active")
    item = KnowledgeFactory(workspace=workspace)
    refs = [ref(first), ref(second), {"type": "knowledge", "id": item.pk}]
    n = 16
    barrier = threading.Barrier(n)

    def send(i):
        play = refs if i % 2 else refs[::-1]
        body = passed_payload(outcome_id=f"self-{i}", in_play=play)
        headers = {"Authorization": f"Bearer {api.raw_token}"}
        with httpx.Client(base_url=live_server.url, headers=headers, timeout=60) as client:
            barrier.wait()
            return client.post(URL, json=body)

    with ThreadPoolExecutor(max_workers=n) as pool:
        responses = list(pool.map(send, range(n)))
    assert [r.status_code for r in responses] == [201] * n, [r.text for r in responses]
    assert all(r.json()["confirmed"] == [] for r in responses)  # the model's word moves nothing
    for row in (first, second, item):
        before = row.confidence
        row.refresh_from_db()
        assert (row.use_count, row.confidence) == (n, before)
        assert row.last_used_at is not None
    assert not ConfidenceChange.objects.exists()


# --- scoped attribution ------------------------------------------------------------------------------------


def test_it_confirms_an_in_play_lesson_only_when_its_operation_ran(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace, operation_key="pytest:.")
    unrelated = post(harness, passed_payload(op="npm:build", in_play=[ref(lesson)]))
    assert unrelated.json()["confirmed"] == []
    related = post(harness, passed_payload(op="pytest:.", in_play=[ref(lesson)]))
    assert related.json()["confirmed"] == [ref(lesson)]
    lesson.refresh_from_db()
    assert lesson.confidence == pytest.approx(0.65)
    assert list(lesson.evidence.values_list("outcome_id", flat=True)) == [related.json()["id"]]


def test_it_contradicts_only_a_failure_on_the_lessons_own_operation(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace, operation_key="pytest:.")
    web = post(harness, failed_payload(op="http:fetch", in_play=[ref(lesson)]))
    assert web.json()["passed"] is False
    assert web.json()["contradicted"] == []
    own = post(harness, failed_payload(op="pytest:.", in_play=[ref(lesson)]))
    assert own.json()["contradicted"] == [ref(lesson)]
    lesson.refresh_from_db()
    assert lesson.confidence == pytest.approx(0.25)


def test_it_neither_credits_nor_blames_when_nothing_was_verified(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace, operation_key="pytest:.")
    body = outcome_payload(approach=[step("pytest:.", "tests", "failed", 1)], in_play=[ref(lesson)])
    response = post(harness, body)
    assert response.json()["passed"] is None
    assert response.json()["contradicted"] == []
    lesson.refresh_from_db()
    assert lesson.confidence == 0.5


def test_it_does_not_credit_a_passed_task_in_which_the_lessons_operation_failed(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace, operation_key="pytest:.")
    body = fixed_payload("pytest:.", "pytest:tests/", in_play=[ref(lesson)])
    assert post(harness, body).json()["confirmed"] == []


def test_it_does_not_credit_another_projects_lesson(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace, project_digest=digest(BLOG))
    response = post(harness, passed_payload(in_play=[ref(lesson)]))
    assert response.json()["confirmed"] == []


def test_it_activates_a_claimed_lesson_on_its_first_attributed_confirmation(harness):
    lesson = LessonFactory(
        workspace=harness.agent.workspace, state=LessonState.CLAIMED, confidence=0.3
    )
    post(harness, passed_payload(in_play=[ref(lesson)]))
    lesson.refresh_from_db()
    assert lesson.state == LessonState.ACTIVE
    assert lesson.confidence == pytest.approx(0.45)


def test_it_retires_a_lesson_contradicted_below_the_floor(harness):
    lesson = LessonFactory(workspace=harness.agent.workspace, confidence=0.4)
    post(harness, failed_payload(in_play=[ref(lesson)]))
    lesson.refresh_from_db()
    assert lesson.confidence == pytest.approx(0.15)
    assert lesson.state == LessonState.RETIRED
    assert lesson.retired_by == "system"


def test_it_gives_in_play_knowledge_the_same_scoped_treatment(harness):
    ws = harness.agent.workspace
    fact = KnowledgeFactory(workspace=ws, confidence=0.5)
    warning = KnowledgeFactory(
        workspace=ws, category="error", operation_key="pytest:tests/", confidence=0.5
    )
    obsolete = KnowledgeFactory(
        workspace=ws, category="error", operation_key="pytest:.", confidence=0.5
    )
    refs = [
        {"type": "knowledge", "id": fact.pk},
        {"type": "error", "id": warning.pk},
        {"type": "error", "id": obsolete.pk},
    ]
    response = post(harness, fixed_payload("pytest:tests/", "pytest:.", in_play=refs))
    body = response.json()
    # A fact with no operation was only in the prompt: a passing test says nothing
    # about it (else any stored text would earn strength from unrelated work).
    assert {"type": "knowledge", "id": fact.pk} not in body["confirmed"]
    assert {"type": "error", "id": warning.pk} in body["confirmed"]  # it failed again
    assert body["contradicted"] == [{"type": "error", "id": obsolete.pk}]  # it works now
    for item, expected in ((fact, 0.5), (warning, 0.65), (obsolete, 0.35)):
        item.refresh_from_db()
        assert item.confidence == pytest.approx(expected)
    # Nor does a failing test blame it.
    failed = post(harness, failed_payload(in_play=[{"type": "knowledge", "id": fact.pk}]))
    assert failed.json()["contradicted"] == []


def test_it_ignores_another_workspaces_ids_in_play(harness, make_api):
    stranger = make_api(scope="harness")
    theirs = LessonFactory(workspace=stranger.agent.workspace)
    their_fact = KnowledgeFactory(workspace=stranger.agent.workspace)
    refs = [ref(theirs), {"type": "knowledge", "id": their_fact.pk}]
    response = post(harness, passed_payload(in_play=refs))
    assert response.json()["confirmed"] == []
    theirs.refresh_from_db()
    their_fact.refresh_from_db()
    assert (theirs.confidence, their_fact.confidence) == (0.5, 0.5)


# --- mechanical lessons ---------------------------------------------------------------------------------------


def test_it_learns_a_mechanical_lesson_from_a_fixed_failure(harness):
    response = post(harness, fixed_payload("pytest:tests/", "pytest:."))
    body = response.json()
    assert len(body["lessons_created"]) == 1
    lesson = Lesson.objects.get(pk=body["lessons_created"][0])
    assert lesson.text == "Use `pytest .` instead of `pytest tests/` for tests."
    assert (lesson.operation_key, lesson.avoid_operation_key) == ("pytest:.", "pytest:tests/")
    assert lesson.source == LessonSource.LOOP
    assert lesson.state == LessonState.ACTIVE
    assert lesson.confidence == 0.5
    assert list(lesson.evidence.values_list("outcome_id", flat=True)) == [body["id"]]


def test_it_confirms_an_existing_mechanical_lesson_instead_of_duplicating_it(harness):
    first = post(harness, fixed_payload("pytest:tests/", "pytest:.")).json()
    second = post(harness, fixed_payload("pytest:tests/", "pytest:.")).json()
    assert second["lessons_created"] == []
    assert second["confirmed"] == [{"type": "lesson", "id": first["lessons_created"][0]}]
    lesson = Lesson.objects.get(source=LessonSource.LOOP)
    assert lesson.confidence == pytest.approx(0.65)
    assert lesson.evidence.count() == 2


def test_it_learns_nothing_from_a_failed_or_unverified_turn(harness):
    failed = fixed_payload("pytest:tests/", "pytest:.")
    failed["checks"] = [check(3, 1)]
    unverified = fixed_payload("pytest:tests/", "pytest:.", checks=[])
    assert post(harness, failed).json()["lessons_created"] == []
    assert post(harness, unverified).json()["lessons_created"] == []
    assert Lesson.objects.count() == 0


def test_it_needs_a_token(client):
    response = client.post(URL, passed_payload(), content_type="application/json")
    assert response.status_code == 401


@pytest.mark.parametrize("item", [0, None, False, [1, 2], 1.5])
def test_it_refuses_an_in_play_entry_of_the_wrong_shape(harness, item):
    response = post(harness, passed_payload(in_play=[item]))
    assert response.status_code == 400
    assert "in_play.0" in response.json()["error"]["fields"]


@pytest.mark.parametrize("body", [[], [None], "outcome", 7])
def test_it_refuses_a_body_that_is_not_an_object(harness, body):
    response = harness.post(URL, body, format="json")
    assert response.status_code == 400
