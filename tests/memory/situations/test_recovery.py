"""The recovery state's counting rules, one by one (through the service)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.core.actors import Actor
from memory.models import Channel, SituationEvent, TurnRecovery
from memory.situations.classify import Signals
from memory.situations.recovery import TurnResult, turn_result_record
from memory.situations.taxonomy import situation_validate
from tests.factories.situations import MACHINE, gh_logged_out

pytestmark = pytest.mark.django_db


@pytest.fixture
def post(agent):
    actor = Actor.for_agent(agent, channel=Channel.HARNESS)
    clock = {"now": timezone.now()}

    def _post(turn="t", seconds=1.0, **fields):
        clock["now"] += timedelta(seconds=seconds)
        if "situation" in fields:
            fields["situation"] = situation_validate(fields["situation"], harness=True)
        result = TurnResult(machine=MACHINE, **fields)
        return turn_result_record(actor=actor, turn_id=turn, result=result, now=clock["now"])

    return _post


def test_a_same_kind_situation_counts_even_when_ok_is_not_said(post):
    post(tool="check_cli_setup", ok=False, situation=gh_logged_out())
    body = post(tool="fetch_page", signals=Signals(tool="fetch_page", http_status=401))
    assert body["open_blockers"][0]["count"] == 1
    assert body["situation"]["kind"] == "auth"


def test_the_blocker_opening_result_does_not_count_itself(post):
    body = post(tool="check_cli_setup", ok=False, situation=gh_logged_out())
    assert body["open_blockers"][0]["count"] == 0 and body["workaround_calls"] == 0


def test_two_blockers_each_count_a_failed_call(post):
    post(tool="check_cli_setup", ok=False, situation=gh_logged_out())
    post(tool="docker", signals=Signals(tool="docker", exit_code=127))
    body = post(tool="run_python", ok=False)
    counts = {b["subject"]: b["count"] for b in body["open_blockers"]}
    assert counts == {"gh": 2, "docker": 1}  # docker's detection was gh's workaround
    assert body["budget_left"] == 0


def test_an_escalation_is_recorded_once_with_steps_and_seconds(post):
    post(tool="check_cli_setup", ok=False, situation=gh_logged_out())
    for _ in range(3):
        body = post(tool="curl", ok=False, seconds=10)
    assert body["action"] == "escalate"
    assert body["escalation"]["steps_since_detect"] == 3
    assert body["escalation"]["seconds_since_detect"] == pytest.approx(30.0)
    post(tool="curl", ok=False)
    turn = TurnRecovery.objects.get()
    assert (turn.steps_to_escalate, turn.seconds_to_escalate) == (3, pytest.approx(30.0))
    assert SituationEvent.objects.filter(event="escalated").count() == 1


def test_a_clean_probe_by_the_blockers_probe_tool_closes_it(post):
    post(tool="check_cli_setup", ok=False, situation=gh_logged_out())
    body = post(tool="check_cli_setup", ok=True, probe=True)
    assert body["open_blockers"] == []
    assert SituationEvent.objects.filter(event="closed", details__trigger="probe_clear").exists()


def test_a_success_on_another_subject_does_not_close(post):
    post(tool="check_cli_setup", ok=False, situation=gh_logged_out())
    assert post(tool="read_file", ok=True)["open_blockers"][0]["subject"] == "gh"


def test_an_unattended_interactive_call_with_no_blocker_opens_one(post):
    body = post(tool="sign_in_cli", interactive=True, attended=False)
    assert body["action"] == "refuse"
    assert body["open_blockers"][0]["subject"] == "sign_in_cli"
    assert body["open_blockers"][0]["source"] == "inferred"
    assert body["refused_calls"] == 1


def test_an_inferred_blocker_from_signals_needs_a_failure(post):
    ok = post(tool="cat", signals=Signals(tool="cat", exit_code=0, stdout="Permission denied"))
    assert ok["open_blockers"] == [] and ok["situation"] is None
    failed = post(tool="ls", signals=Signals(tool="ls", exit_code=2, stderr="Permission denied"))
    assert failed["open_blockers"][0]["kind"] == "permission"


def test_a_user_answer_with_nothing_open_is_harmless(post):
    body = post(user_answered=True)
    assert body["action"] == "continue" and body["step"] == 0


def test_a_result_that_says_nothing_neither_counts_nor_closes(post):
    post(tool="check_cli_setup", ok=False, situation=gh_logged_out())
    body = post(tool="gh", subject="gh")  # no ok, no exit code, no status
    assert body["open_blockers"][0]["count"] == 0
    assert post(tool="gh", signals=Signals(tool="gh", exit_code=0))["open_blockers"] == []


def _agent_post(agent, turn="t", **fields):
    """The same agent's model, posting with its agent token."""
    actor = Actor.for_agent(agent, channel=Channel.AGENT)
    result = TurnResult(machine=MACHINE, **fields)
    return turn_result_record(
        actor=actor, turn_id=turn, result=result, now=timezone.now() + timedelta(minutes=5)
    )


def test_an_agent_tokens_success_does_not_close_a_harness_blocker(post, agent):
    post(tool="check_cli_setup", ok=False, situation=gh_logged_out())
    for _ in range(3):
        body = post(tool="curl", ok=False)
    assert body["action"] == "escalate"
    claimed = _agent_post(agent, tool="gh", subject="gh", ok=True)
    assert claimed["action"] == "escalate"
    assert [b["subject"] for b in claimed["open_blockers"]] == ["gh"]


def test_an_agent_token_cannot_answer_for_the_person(post, agent):
    post(tool="check_cli_setup", ok=False, situation=gh_logged_out())
    for _ in range(3):
        post(tool="curl", ok=False)
    claimed = _agent_post(agent, user_answered=True)
    assert claimed["action"] == "escalate" and claimed["open_blockers"]
    assert not SituationEvent.objects.filter(event="closed").exists()
    # The harness relaying the person's answer does close it.
    assert post(user_answered=True)["open_blockers"] == []
