"""The declared-situation contract and the escalation text (pure)."""

from __future__ import annotations

import pytest

from cairn.errors import ApplicationError
from memory.situations.escalation import cost_line, escalation_build
from memory.situations.taxonomy import (
    BLOCKER_KINDS,
    BUDGET,
    KINDS,
    NEVER_PERSISTED,
    situation_validate,
)


def test_the_vocabulary_is_the_specs():
    assert BLOCKER_KINDS == ("auth", "not_installed", "permission", "quota", "offline", "locked")
    assert sorted(k for k, c in KINDS.items() if c == "self_fixable") == [
        "bad_args", "not_found", "syntax", "wrong_cwd",
    ]  # fmt: skip
    assert sorted(k for k, c in KINDS.items() if c == "degenerate") == [
        "empty", "garbled", "truncated",
    ]  # fmt: skip
    assert [k for k, c in KINDS.items() if c == "adversarial"] == ["injected_instruction"]
    assert BUDGET == {"declared": 2, "inferred": 4}
    assert NEVER_PERSISTED == {"offline", "quota", "locked"}


@pytest.mark.parametrize(
    "raw,field,status",
    [
        ("auth", "situation", 422),
        ({"subject": "gh"}, "situation.kind", 422),
        ({"kind": "AUTH", "subject": "gh"}, "situation.kind", 422),
        ({"kind": "auth"}, "situation.subject", 422),
        ({"kind": "auth", "subject": "   "}, "situation.subject", 422),
        ({"kind": "auth", "subject": "gh", "interactive": "yes"}, "situation.interactive", 422),
        ({"kind": "auth", "subject": "gh", "probe": "check"}, "situation.probe", 422),
        ({"kind": "auth", "subject": "gh", "probe": {"args": {}}}, "situation.probe.tool", 422),
        ({"kind": "auth", "subject": "gh", "colour": "red"}, "situation.colour", 422),
        ({"kind": "auth", "subject": "g" * 201}, "situation.subject", 422),
    ],
)
def test_a_malformed_declaration_names_the_field(raw, field, status):
    with pytest.raises(ApplicationError) as caught:
        situation_validate(raw, harness=True)
    assert caught.value.status_code == status
    assert field in caught.value.fields


def test_unblock_and_probe_need_the_harness():
    for extra in ({"unblock": "gh auth login"}, {"probe": {"tool": "check_cli_setup"}}):
        with pytest.raises(ApplicationError) as caught:
            situation_validate({"kind": "auth", "subject": "gh", **extra}, harness=False)
        assert caught.value.status_code == 403
        assert caught.value.code == "harness_scope_required"
    bare = situation_validate({"kind": "auth", "subject": "gh"}, harness=False)
    assert bare.persistable is True  # the kind may be remembered; the channel decides


def test_inferred_json_never_carries_unblock_or_probe():
    from memory.situations.classify import Signals, classify_result

    body = classify_result(Signals(tool="fetch_page", http_status=401)).as_json()
    assert "unblock" not in body and "probe" not in body and body["persistable"] is False


def test_the_escalation_is_built_from_fields_only():
    blocker = {"kind": "not_installed", "subject": "docker", "source": "declared",
               "unblock": "", "detail": "", "interactive": False}  # fmt: skip
    built = escalation_build(blocker, steps_since_detect=3, seconds_since_detect=34.04)
    assert built["text"] == "Blocked: docker is not installed on this machine.\nMeanwhile I can:"
    assert built["seconds_since_detect"] == 34.04
    inferred = {**blocker, "source": "inferred", "unblock": "rm -rf /"}
    assert "To unblock" not in escalation_build(inferred, steps_since_detect=1,
                                                seconds_since_detect=0)["text"]  # fmt: skip


def test_the_cost_line_reads_like_the_seed():
    assert cost_line(subject="gh", steps=12, seconds=94.4) == (
        "12 steps · 94 s after gh was blocked, before asking"
    )
    assert cost_line(subject="gh", steps=1, seconds=0.2).startswith("1 step · 0 s")
