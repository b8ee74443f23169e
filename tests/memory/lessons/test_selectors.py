"""Why an outcome passed, in words, from the same rules that decided it."""

import pytest

from memory.lessons.selectors import outcome_explain
from memory.lessons.verdict import outcome_passed
from tests.factories.lessons import check, step
from tests.factories.review import OutcomeFactory

pytestmark = pytest.mark.django_db


def explain(approach, checks, claim_ok=True, **fields):
    passed = outcome_passed(approach=approach, checks=checks, claim_ok=claim_ok)
    outcome = OutcomeFactory(
        approach=approach, checks=checks, claim_ok=claim_ok, passed=passed, **fields
    )
    return outcome_explain(outcome=outcome)


def test_a_pass_names_the_deciding_run_and_the_last_edit():
    why = explain(
        [step("edit:src/app.py", "src/app.py", "ok", 2, mutated=True)],
        [check(1, 1), check(3, 0)],
    )
    assert why.passed is True and why.matches
    assert why.summary == (
        "passed: latest pytest run exited 0 at step 3, after the last edit at step 2 "
        "(edit:src/app.py)."
    )
    assert [c["role"] for c in why.checks] == ["older run", "counts"]
    assert "replaced by the later run at step 3" in why.notes[0]
    assert why.last_mutation == 2


def test_a_pass_without_edits_says_so_and_lists_every_check():
    why = explain(
        [step("pytest:.", "tests", "ok", 1)],
        [check(2, 0), check(3, 0, kind="lint", label="ruff", target="src")],
    )
    assert why.summary == (
        "passed: latest runs of pytest (step 2) and ruff (step 3) all exited 0; "
        "no step edited anything."
    )


def test_a_failing_exit_code_is_the_reason():
    why = explain([step("pytest:.", "tests", "failed", 1)], [check(2, 1)])
    assert why.passed is False
    assert why.summary == "failed: latest pytest run exited 1 at step 2."
    assert [c["role"] for c in why.checks] == ["failed"]


def test_a_check_before_the_last_edit_is_stale():
    why = explain(
        [step("edit:a.py", "a.py", "ok", 3, mutated=True)],
        [check(2, 0)],
    )
    assert why.passed is False
    assert why.summary == (
        "failed: latest pytest run at step 2 is stale, it ran before the last edit at step 3 "
        "(edit:a.py)."
    )
    assert [c["role"] for c in why.checks] == ["stale"]


def test_a_dishonest_claim_fails_an_otherwise_clean_turn():
    why = explain([step("pytest:.", "tests", "ok", 1)], [check(2, 0)], claim_ok=False)
    assert why.passed is False
    assert "misreported its checks (claim_ok is false)" in why.summary


def test_nothing_ran_means_nothing_was_verified():
    why = explain([step("pytest:.", "tests", "ok", 1)], [check(2, None, ran=False)])
    assert why.passed is None
    assert why.summary.startswith("not verified: none of the 1 recorded checks ran")
    assert [c["role"] for c in why.checks] == ["not run"]
    assert explain([], []).summary.startswith("not verified: no checks were recorded")


def test_ignored_checks_and_the_agents_own_word_are_noted():
    why = explain(
        [step("pytest:.", "tests", "ok", 1)],
        [check(2, 0), check(2, None, ran=False, kind="build", label="make")],
        reported_passed=False,
    )
    assert why.passed is True
    assert "1 check did not run and was ignored." in why.notes
    assert any("reported passed=false" in note for note in why.notes)


def test_a_stored_verdict_that_differs_from_todays_rules_is_flagged():
    outcome = OutcomeFactory(
        approach=[step("pytest:.", "tests", "failed", 1)], checks=[check(2, 1)], passed=True
    )
    why = outcome_explain(outcome=outcome)
    assert why.passed is False and why.stored is True and not why.matches
