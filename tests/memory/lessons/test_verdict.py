"""The server's verdict on an outcome and mechanical pairs."""

from memory.lessons.verdict import goal_digest, mechanical_pairs, outcome_passed
from tests.factories.lessons import check, step


def passed(approach=(), checks=(), claim_ok=True):
    return outcome_passed(approach=list(approach), checks=list(checks), claim_ok=claim_ok)


# --- passed: one test per rule -----------------------------------------------------------------


def test_it_is_null_without_checks():
    assert passed(approach=[step("edit:a", "a", mutated=True)]) is None


def test_it_ignores_checks_that_did_not_run():
    # A refused test run did not run: nothing was verified.
    assert passed(checks=[check(1, exit_code=None, ran=False)]) is None
    # A failing check that did not run does not fail the outcome either.
    assert passed(checks=[check(1, exit_code=2, ran=False, label="other"), check(2, 0)]) is True


def test_it_passes_when_every_latest_run_exited_zero():
    assert passed(checks=[check(1, 0), check(2, 0, kind="lint", label="ruff")]) is True


def test_it_fails_when_a_latest_run_exited_nonzero():
    assert passed(checks=[check(1, 0), check(2, 1, kind="lint", label="ruff")]) is False


def test_it_fails_when_a_ran_check_has_no_exit_code():
    assert passed(checks=[check(1, None)]) is False


def test_it_keeps_only_the_latest_run_of_each_check():
    # Failed first, then fixed: the latest run decides.
    assert passed(checks=[check(1, 1), check(3, 0)]) is True
    # Passed first, then broke: the latest run decides.
    assert passed(checks=[check(1, 0), check(3, 1)]) is False
    # Records may arrive out of order: "latest" is by step, not by position.
    assert passed(checks=[check(3, 0), check(1, 1)]) is True


def test_it_tells_check_identities_apart_by_kind_label_and_target():
    # Same label, different target: two checks; the failing one stands.
    assert passed(checks=[check(1, 1, target="tests/a"), check(2, 0, target="tests/b")]) is False


def test_it_fails_a_check_that_ran_before_the_last_edit():
    approach = [step("edit:cart.py", "cart.py", "ok", 2, mutated=True)]
    assert passed(approach=approach, checks=[check(1, 0)]) is False
    # Rerun after the edit: fresh again.
    assert passed(approach=approach, checks=[check(1, 0), check(3, 0)]) is True


def test_a_check_at_the_same_step_as_the_last_edit_is_not_fresh():
    # Which ran first cannot be told: the check does not prove the edit.
    approach = [step("edit:cart.py", "cart.py", "ok", 2, mutated=True)]
    assert passed(approach=approach, checks=[check(2, 0)]) is False
    assert passed(approach=approach, checks=[check(2, 0), check(3, 0)]) is True


def test_it_does_not_count_non_mutating_steps_as_edits():
    approach = [step("read:cart.py", "cart.py", "ok", 5, mutated=False)]
    assert passed(approach=approach, checks=[check(1, 0)]) is True


def test_it_fails_a_dishonest_claim_even_when_checks_pass():
    assert passed(checks=[check(1, 0)], claim_ok=False) is False


def test_it_digests_only_the_first_200_characters_of_the_goal():
    goal = "x" * 200
    assert goal_digest(goal) == goal_digest(goal + " and more words")
    assert goal_digest(goal) != goal_digest("y" + goal[1:])
    assert len(goal_digest(goal)) == 64


# --- mechanical pairs ------------------------------------------------------------------------------


def test_it_pairs_a_failure_with_a_later_success_on_the_same_target():
    approach = [
        step("pytest:tests/", "tests", "failed", 1),
        step("curl:api", "api", "failed", 2),
        step("pytest:.", "tests", "ok", 3),
    ]
    assert mechanical_pairs(approach) == [("pytest:tests/", "pytest:.", "tests")]


def test_it_does_not_pair_across_targets_or_backwards_or_with_itself():
    assert mechanical_pairs([step("a", "t1", "failed", 1), step("b", "t2", "ok", 2)]) == []
    assert mechanical_pairs([step("b", "t", "ok", 1), step("a", "t", "failed", 2)]) == []
    assert mechanical_pairs([step("a", "t", "failed", 1), step("a", "t", "ok", 2)]) == []
    assert mechanical_pairs([step("a", "", "failed", 1), step("b", "", "ok", 2)]) == []
