"""agents.apis.common.validated: one reused serializer per thread, the same answers
and errors as a new serializer's is_valid, and nothing carried from call to call."""

from __future__ import annotations

import threading

import pytest
from rest_framework import serializers

from agents.apis.common import validated
from agents.apis.outcomes import OutcomeCreateApi
from tests.factories.lessons import check, outcome_payload, step

Outcome = OutcomeCreateApi.OutcomeInputSerializer


def _fresh(data):
    serializer = Outcome(data=data)
    if serializer.is_valid():
        return serializer.validated_data, None
    return None, serializer.errors


def _reused(data):
    try:
        return validated(Outcome, data), None
    except serializers.ValidationError as exc:
        return None, exc.detail


GOOD = outcome_payload(
    outcome_id="a", approach=[step("pytest", "tests", "ok", 1)], checks=[check(1, 0)]
)
BAD = [
    {**GOOD, "approach": [{"operation_key": "x", "outcome": "sideways", "step": -1}]},
    {**GOOD, "checks": [{"kind": "test"}], "turn_index": "x"},
    {**GOOD, "in_play": ["lesson:", {"type": "nope", "id": 1}]},
    ["not", "an", "object"],
    {},
]


@pytest.mark.parametrize("data", [GOOD, *BAD])
def test_it_answers_what_a_new_serializer_answers(data):
    assert _reused(data) == _fresh(data)


def test_nothing_carries_over_between_calls():
    for data in [BAD[0], GOOD, BAD[1], GOOD, BAD[2]]:
        assert _reused(data) == _fresh(data)
    first, _ = _reused({**GOOD, "outcome_id": "one"})
    second, _ = _reused({**GOOD, "outcome_id": "two"})
    assert (first["outcome_id"], second["outcome_id"]) == ("one", "two")


def test_threads_each_get_their_own_answers():
    problems = []

    def run(i):
        for k in range(50):
            data = BAD[(i + k) % len(BAD)] if k % 3 == 0 else {**GOOD, "outcome_id": f"{i}-{k}"}
            if _reused(data) != _fresh(data):
                problems.append((i, k))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []
