"""POST /api/v1/outcomes/ runs a fixed, small number of SQL queries (issue 17).

Counted in a test transaction, so the request's own transaction shows as a
SAVEPOINT / RELEASE pair (BEGIN / COMMIT in production). The token's last-used
write (at most once a minute per token) is kept out by a first post.
"""

from __future__ import annotations

import pytest
from django.conf import settings

from memory.models import ConfidenceChange, Lesson, LessonEvidence, Outcome
from tests.factories.lessons import LessonFactory, check, outcome_payload, step

URL = "/api/v1/outcomes/"


def _body(lesson, outcome_id):
    return outcome_payload(
        outcome_id=outcome_id,
        approach=[step("edit:cart.py", "cart.py", "ok", 1, True), step("pytest", "tests", "ok", 2)],
        checks=[check(2, 0)],
        claim_ok=True,
        in_play=[{"type": "lesson", "id": lesson.pk}],
    )


@pytest.fixture
def lesson(harness):
    return LessonFactory(workspace=harness.agent.workspace, operation_key="pytest", state="active")


def _warm(client, lesson):
    assert client.post(URL, _body(lesson, "warm"), format="json").status_code == 201


def test_a_harness_outcome_moving_a_lesson_is_seven_queries(
    harness, lesson, django_assert_num_queries
):
    _warm(harness, lesson)
    # 1 the token (looked up once, shared by the write guard and the authentication)
    # 2 SELECT the in-play lessons without a lock: would confirming them write to them
    #   (``_quiet``)? This one is below its ceiling, so it would
    # 3 SAVEPOINT (BEGIN)
    # 4 SELECT ... FOR UPDATE the in-play lessons, with "does another project hold
    #   the same lesson" (the promotion check) as a column: read first, so the answer
    #   and the evidence link are foreseen
    # 5 INSERT the outcome, its id drawn from the sequence into its stored answer, with
    #   (CTEs of the same statement) INSERT ... ON CONFLICT DO NOTHING the project's
    #   name from its remote (a project already named writes nothing; issue 16) and the
    #   lesson's evidence link. A retry loses here, on (agent, outcome_id)
    # 6 UPDATE the lesson's confidence and INSERT its ledger row, in one statement
    # 7 RELEASE SAVEPOINT (COMMIT)
    # The stored answer was foreseen right: no UPDATE of it.
    with django_assert_num_queries(7) as queries:
        response = harness.post(URL, _body(lesson, "one"), format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["confirmed"] == [{"type": "lesson", "id": lesson.pk}]
    sql = [q["sql"] for q in queries.captured_queries]
    assert sql[1].startswith('SELECT "memory_lesson"') and " FOR " not in sql[1]
    assert sql[3].startswith('SELECT "memory_lesson"') and "FOR NO KEY UPDATE" in sql[3]
    assert "memory_projectlabel" in sql[4] and "memory_lessonevidence" in sql[4]
    assert not [s for s in sql if s.startswith('UPDATE "memory_outcome"')]
    stored = Outcome.objects.get(pk=body["id"]).response
    assert stored == body
    # One link, and the confidence moved once, by this outcome.
    outcome = Outcome.objects.get(pk=body["id"])
    assert list(LessonEvidence.objects.filter(outcome=outcome).values_list("lesson_id")) == [
        (lesson.pk,)
    ]
    assert ConfidenceChange.objects.filter(evidence_id=f"outcome:{outcome.pk}").count() == 1


def test_a_foreseen_link_attribution_does_not_make_is_taken_back(harness, lesson, monkeypatch):
    """The safety net under the foresight: a link written with the row that attribution
    then does not make (here, another project's lesson, foreseen wrongly on purpose)
    is deleted in the same transaction, before anything else could use it."""
    from memory.lessons import outcomes

    elsewhere = LessonFactory(
        workspace=lesson.workspace,
        operation_key="pytest",
        state="active",
        scope="project",
        project_digest="e" * 64,
    )
    monkeypatch.setattr(
        outcomes,
        "_foreseen_links",
        lambda **_: {(elsewhere.pk, LessonEvidence.Relation.SUPPORTS)},
    )
    body = _body(lesson, "wrong")
    body["in_play"].append({"type": "lesson", "id": elsewhere.pk})
    response = harness.post(URL, body, format="json")
    assert response.status_code == 201
    answer = response.json()
    assert answer["confirmed"] == [{"type": "lesson", "id": lesson.pk}]
    links = LessonEvidence.objects.filter(outcome_id=answer["id"])
    assert sorted(links.values_list("lesson_id", flat=True)) == [lesson.pk]
    assert not ConfidenceChange.objects.filter(target_type="lesson", target_id=elsewhere.pk)


def test_a_stored_answer_foreseen_wrong_is_corrected(harness, lesson, django_assert_num_queries):
    """A lesson learned from the approach cannot be foreseen: the answer is updated."""
    _warm(harness, lesson)
    body = _body(lesson, "learns")
    body["approach"] = [step("pytest:tests/", "tests", "failed", 0), *body["approach"]]
    response = harness.post(URL, body, format="json")
    assert response.status_code == 201
    answer = response.json()
    assert answer["lessons_created"] and answer["confirmed"]
    assert Outcome.objects.get(pk=answer["id"]).response == answer


def test_an_agent_token_outcome_reads_its_in_play_rows_only_after_its_commit(
    api, harness, lesson, django_assert_num_queries
):
    _warm(api, lesson)
    # token; SAVEPOINT; INSERT outcome with its response and the project's name if new;
    # RELEASE (COMMIT). Then its recency, which production gathers with other outcomes'
    # and writes in the background (test settings write it at once): SELECT the
    # in-play lessons (no lock: the model's word moves only recency) and UPDATE the
    # lesson's recency (self_report). So on the request path it is the token and the
    # insert, as an outcome with nothing in play. The response stored with the row is
    # already the answer: no UPDATE of it.
    with django_assert_num_queries(6) as queries:
        response = api.post(URL, _body(lesson, "one"), format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["confirmed"] == []
    assert Outcome.objects.get(pk=body["id"]).response == body
    sql = [q["sql"] for q in queries.captured_queries]
    assert 'INSERT INTO "memory_outcome"' in sql[2]
    assert sql[3].startswith("RELEASE SAVEPOINT")
    assert sql[4].startswith('SELECT "memory_lesson"') and "FOR" not in sql[4].split("WHERE")[-1]
    assert sql[5].startswith('UPDATE "memory_lesson"') and "use_count" in sql[5]
    assert not [s for s in sql if s.startswith('UPDATE "memory_outcome"')]
    lesson.refresh_from_db()
    assert lesson.use_count == 2  # the warm-up and this one


def test_an_idempotency_key_adds_four_queries(harness, lesson, django_assert_num_queries):
    _warm(harness, lesson)
    # the seven above, and: pg_advisory_lock on (agent, key); SELECT the stored
    # response; INSERT ... ON CONFLICT DO NOTHING the response; pg_advisory_unlock
    with django_assert_num_queries(11):
        response = harness.post(
            URL, _body(lesson, "one"), format="json", HTTP_IDEMPOTENCY_KEY="key-1"
        )
    assert response.status_code == 201


def test_a_retry_answers_the_stored_body_in_eight_queries(
    harness, lesson, django_assert_num_queries
):
    _warm(harness, lesson)
    first = harness.post(URL, _body(lesson, "one"), format="json")
    # token; SELECT the in-play lessons (would it write to them?); SAVEPOINT; SELECT
    # them locked (read before the insert); INSERT (unique violation); ROLLBACK TO
    # SAVEPOINT and RELEASE (ROLLBACK); SELECT the stored body. Nothing is applied twice.
    with django_assert_num_queries(8):
        again = harness.post(URL, _body(lesson, "one"), format="json")
    assert again.status_code == 200
    assert again.json() == first.json()


@pytest.mark.django_db(transaction=True)
def test_as_production_runs_them_only_a_harness_outcome_opens_a_transaction(
    api, harness, lesson, django_assert_num_queries
):
    """Outside a test's transaction (autocommit, as the server runs): an outcome that
    writes nothing after its own row is one statement, with no BEGIN or COMMIT."""
    _warm(api, lesson)
    assert harness.post(URL, _body(lesson, "warm-h"), format="json").status_code == 201
    # token; INSERT (with the project's name); then the recency mark, its rows read and
    # written (at once in the tests' settings; gathered in production)
    with django_assert_num_queries(4) as queries:
        assert api.post(URL, _body(lesson, "agent"), format="json").status_code == 201
    sql = [q["sql"] for q in queries.captured_queries]
    assert not [s for s in sql if s.split()[0] in ("BEGIN", "COMMIT", "SAVEPOINT")]
    assert 'INSERT INTO "memory_outcome"' in sql[1]
    # Nothing in play: token and INSERT.
    with django_assert_num_queries(2):
        body = outcome_payload(outcome_id="bare", checks=[check(1, 0)])
        assert api.post(URL, body, format="json").status_code == 201
    # A harness outcome that moves its lesson's confidence: the unlocked read that
    # finds it would, then all of it in one transaction, the lesson locked.
    with django_assert_num_queries(7) as queries:
        assert harness.post(URL, _body(lesson, "verified"), format="json").status_code == 201
    sql = [q["sql"] for q in queries.captured_queries]
    assert sql[2] == "BEGIN" and sql[-1] == "COMMIT" and "FOR NO KEY UPDATE" in sql[3]
    # One confirming a lesson already at its ceiling writes nothing to it: token, the
    # unlocked read, and the INSERT with its evidence link. No transaction, no lock.
    Lesson.objects.filter(pk=lesson.pk).update(confidence=settings.CAIRN_LESSON_CONFIDENCE_MAX)
    with django_assert_num_queries(3) as queries:
        quiet = harness.post(URL, _body(lesson, "at-ceiling"), format="json")
    assert quiet.status_code == 201
    assert quiet.json()["confirmed"] == [{"type": "lesson", "id": lesson.pk}]
    sql = [q["sql"] for q in queries.captured_queries]
    assert " FOR " not in sql[1] and "memory_lessonevidence" in sql[2]
    assert LessonEvidence.objects.filter(
        lesson=lesson, outcome__outcome_id="at-ceiling", relation="supports"
    ).exists()
    # A retry of the agent's outcome answers its stored body, nothing applied again.
    first = Outcome.objects.get(outcome_id="agent").response
    again = api.post(URL, _body(lesson, "agent"), format="json")
    assert again.status_code == 200 and again.json() == first
    lesson.refresh_from_db()
    # the agent's warm-up and "agent" (the retry marks nothing; a harness confirmation
    # is evidence, not a use)
    assert lesson.use_count == 2
