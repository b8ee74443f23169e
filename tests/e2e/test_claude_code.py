"""Claude Code 2.1.328 itself, connected to a live Cairn as docs/connect.md says, run
with ``claude -p`` against the scripted model server: what the hooks and cairn-mcp
record is what the binary really did."""

from __future__ import annotations

import json
import os
import re

import pytest

from memory.models import (
    Channel,
    ConversationTurn,
    Knowledge,
    Lesson,
    Outcome,
    ToolCall,
)
from tests.e2e.conftest import FIXTURES, bash
from tests.e2e.model_server import Switch, text, tool

pytestmark = pytest.mark.django_db(transaction=True)

FIXTURE = FIXTURES / "claude_code_2.1.328.jsonl"
LESSONS_HEADING = "Lessons (earned from verified outcomes):"

SESSION_1 = [
    [bash("pip install -r requirements.txt")],  # the missing package: exit 1
    [tool("Read", {"file_path": "requirements.txt"})],  # Edit refuses an unread file
    [
        tool(
            "Edit",
            {
                "file_path": "requirements.txt",
                "old_string": "cairn-e2e-missing-package==1.0\n",
                "new_string": "",
            },
        )
    ],
    [bash("pip install -r requirements.txt")],
    [bash("python -m pytest -q")],
    [text("Installed the requirements; the tests pass.")],
]


def absolute_edit(claude, turns):
    """The Read and Edit tools want absolute paths (a copy: the script is shared)."""
    turns = json.loads(json.dumps(turns))
    for turn in turns:
        for block in turn:
            if block.get("name") in ("Read", "Edit"):
                block["input"]["file_path"] = str(claude.project / block["input"]["file_path"])
    return turns


def session_1(claude):
    return claude.run(
        "Install the requirements and run the tests", absolute_edit(claude, SESSION_1)
    )


def test_session_1_becomes_a_harness_outcome_with_real_exit_codes_and_no_lesson(claude, tokens):
    claude.install(tokens["harness"], tokens["agent"])
    run = session_1(claude)
    assert run.returncode == 0, run.stderr
    assert run.result["result"] == "Installed the requirements; the tests pass."
    assert claude.model.escapes == []  # nothing but the model server and Cairn

    results = claude.model.recorder.tool_results()
    assert [(r["name"], r["is_error"]) for r in results] == [
        ("Bash", True),
        ("Read", False),
        ("Edit", False),
        ("Bash", False),
        ("Bash", False),
    ]
    assert results[0]["content"].startswith("Exit code 1")

    outcome = Outcome.objects.get()
    assert (outcome.channel, outcome.passed) == (Channel.HARNESS, True)
    assert outcome.goal_digest  # the prompt became the turn's goal
    assert [(s["operation_key"], s["target"], s["outcome"]) for s in outcome.approach] == [
        ("bash:pip:install", "requirements.txt", "failed"),
        ("read", "requirements.txt", "ok"),
        ("edit", "requirements.txt", "ok"),
        ("bash:pip:install", "requirements.txt", "ok"),
        ("bash:pytest", ".", "ok"),
    ]
    [check] = outcome.checks
    # the evidence is the declared check the Stop hook ran, not the model's own pytest
    assert (check["kind"], check["label"], check["exit_code"]) == ("test", "declared:pytest", 0)

    calls = ToolCall.objects.order_by("at", "id")
    assert [(c.tool, c.operation_key, c.ok, c.channel) for c in calls] == [
        ("Bash", "bash:pip:install", False, Channel.HARNESS),
        ("Read", "read", True, Channel.HARNESS),
        ("Edit", "edit", True, Channel.HARNESS),
        ("Bash", "bash:pip:install", True, Channel.HARNESS),
        ("Bash", "bash:pytest", True, Channel.HARNESS),
    ]
    assert calls[0].error.startswith("Exit code 1")  # the status the binary reported

    # Reading and editing requirements.txt fixed it, and the command that failed is the
    # one that then worked: no command to prefer over another, so no lesson (issue 51:
    # a read or an edit is never "instead of" a command).
    assert not Lesson.objects.exists()
    prompt = ConversationTurn.objects.get(role="user")
    assert (prompt.channel, prompt.content) == (
        Channel.HARNESS,
        "Install the requirements and run the tests",
    )


def test_session_2_gets_the_lessons_and_uses_cairns_memory_tools(claude, tokens):
    claude.install(tokens["harness"], tokens["agent"])
    assert session_1(claude).returncode == 0
    remembered = "The shop's tests run with python -m pytest -q; requirements.txt is offline."
    run = claude.run(
        "What do we know about this project?",
        [
            # Claude Code defers MCP tools behind its tool search: load them first.
            [tool("ToolSearch", {"query": "select:mcp__cairn__recall,mcp__cairn__remember"})],
            [tool("mcp__cairn__remember", {"content": remembered})],
            [tool("mcp__cairn__recall", {"query": "how do the shop's tests run?"})],
            [text("Noted.")],
        ],
    )
    assert run.returncode == 0, run.stderr
    first = claude.model.recorder.main_requests()[0]
    # SessionStart's additionalContext reaches the model; session 1 taught no lesson.
    assert LESSONS_HEADING not in first["messages_text"] + first["system"]
    assert "mcp__cairn__recall" not in first["tools"]  # deferred until searched

    results = claude.model.recorder.tool_results()
    assert [r["name"] for r in results] == [
        "ToolSearch",
        "mcp__cairn__remember",
        "mcp__cairn__recall",
    ]
    assert not any(r["is_error"] for r in results), results
    remember, recall = results[1]["content"], results[2]["content"]
    item = Knowledge.objects.get(content=remembered)
    assert item.channel == Channel.AGENT  # the model's word, not evidence
    assert str(item.pk) in remember  # Cairn's answer, as the model received it
    assert remembered in recall

    # The second session's own turn is on the harness channel, passed unverified: no checks.
    second = Outcome.objects.exclude(pk=Outcome.objects.order_by("created_at").first().pk).get()
    assert second.channel == Channel.HARNESS
    assert [s["operation_key"] for s in second.approach] == [
        "toolsearch",
        "mcp__cairn__remember",
        "mcp__cairn__recall",
    ]


def test_cairn_down_mid_session_changes_nothing_for_claude_code(claude, tokens):
    """Cairn answers SessionStart and the prompt, then goes away (connections closed)
    once the first tool ran: the session finishes as if nothing happened, and a later
    session, once Cairn is back, sends the turn that was kept."""
    with Switch(claude.cairn_url) as switch:
        claude.install(tokens["harness"], tokens["agent"], url=switch.url)

        def cairn_goes_down(digest):
            if digest["tools"] and len(digest["tool_results"]) >= 1:
                switch.on = False

        claude.model.recorder.on_request = cairn_goes_down
        run = session_1(claude)
        claude.model.recorder.on_request = None
        assert run.returncode == 0, run.stderr
        assert run.result["result"] == "Installed the requirements; the tests pass."
        assert run.wall_s < 60
        assert not switch.on
        first_session = claude.payloads()[0]["session_id"]
        assert not Outcome.objects.exists()  # the Stop hook could not send it
        # The prompt went through while Cairn was up.
        assert ConversationTurn.objects.filter(role="user").count() == 1

        switch.on = True  # Cairn is back; a new session (a new session id) runs
        run = claude.run("Say hello", [[text("Hello.")]])
        assert run.returncode == 0, run.stderr
    kept = Outcome.objects.get(session_id=first_session)  # sent by the second session
    assert (kept.channel, kept.passed) == (Channel.HARNESS, True)
    prompts = set(ConversationTurn.objects.filter(role="user").values_list("content", flat=True))
    assert prompts == {"Install the requirements and run the tests", "Say hello"}


def payload_shapes(payloads: list[dict]) -> dict[str, list[str]]:
    shapes: dict[str, set] = {}
    for payload in payloads:
        event = payload["hook_event_name"]
        kind = event
        if event.startswith(("PreToolUse", "PostToolUse")):
            kind = f"{event}:{payload.get('tool_name')}"
        shapes.setdefault(kind, set()).update(payload)
    return {kind: sorted(keys) for kind, keys in sorted(shapes.items())}


def test_the_payloads_the_binary_sends_are_what_cairn_hook_reads(claude, tokens):
    """The recorded payloads (tests/e2e/fixtures/claude_code_2.1.328.jsonl) against
    this run's: the same events and fields, and the fields cairn-hook reads present
    with the meaning it gives them."""
    claude.install(tokens["harness"], tokens["agent"])
    assert session_1(claude).returncode == 0
    payloads = claude.payloads()
    events = [p["hook_event_name"] for p in payloads]
    assert events[:2] == ["SessionStart", "UserPromptSubmit"]
    assert events[-1] == "Stop"
    assert events.count("PreToolUse") == 5, claude.model.recorder.tool_results()
    assert events.count("PostToolUseFailure") == 1
    assert events.count("PostToolUse") == 4

    for payload in payloads:
        assert payload["session_id"] and payload["cwd"] == str(claude.project)
    [prompt] = [p for p in payloads if p["hook_event_name"] == "UserPromptSubmit"]
    assert prompt["prompt"] == "Install the requirements and run the tests"
    [failure] = [p for p in payloads if p["hook_event_name"] == "PostToolUseFailure"]
    # No exit-code field: the status is in the error text's first line.
    assert failure["tool_name"] == "Bash"
    assert failure["tool_input"]["command"] == "pip install -r requirements.txt"
    assert re.match(r"Exit code 1\n", failure["error"])
    assert "tool_response" not in failure
    for post in [p for p in payloads if p["hook_event_name"] == "PostToolUse"]:
        assert isinstance(post["tool_response"], dict)
        assert post["tool_use_id"].startswith("toolu_")
        if post["tool_name"] == "Bash":
            assert post["tool_response"].get("interrupted") is False
            assert not {"exit_code", "exitCode", "returncode"} & set(post["tool_response"])
    [stop] = [p for p in payloads if p["hook_event_name"] == "Stop"]
    assert stop["stop_hook_active"] is False

    if os.environ.get("CAIRN_E2E_RECORD"):
        FIXTURE.parent.mkdir(exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9]", "-", str(claude.project))
        lines = "".join(json.dumps(p) + "\n" for p in payloads)
        lines = lines.replace(str(claude.project), "{cwd}").replace(str(claude.home), "{home}")
        FIXTURE.write_text(lines.replace(slug, "{project_slug}"))
    fixture = FIXTURE.read_text().splitlines()
    recorded = [json.loads(line) for line in fixture if line]
    assert payload_shapes(payloads) == payload_shapes(recorded), (
        "Claude Code's hook payloads changed shape: check what cairn-hook reads, then "
        "re-record with CAIRN_E2E_RECORD=1 make e2e"
    )
