"""The scripted model server by itself: the turn it plays follows the tool results the
conversation holds, non-streaming answers are whole messages, and the stream carries
the events of the Messages API in order, with a tool call's input split in chunks."""

from __future__ import annotations

import json

import httpx

from tests.e2e.model_server import ModelServer, text, tool

SCRIPT = [
    [tool("Bash", {"command": "pytest -q", "description": "run the tests"})],
    [text("All green.")],
]
TOOLS = [{"name": "Bash", "input_schema": {"type": "object"}}]


def ask(url: str, messages: list, *, stream: bool) -> httpx.Response:
    body = {"model": "m", "max_tokens": 10, "messages": messages, "tools": TOOLS, "stream": stream}
    return httpx.post(f"{url}/v1/messages", json=body, timeout=10)


def test_non_streaming_plays_the_script_by_tool_results():
    with ModelServer() as model:
        model.play(SCRIPT)
        first = ask(model.url, [{"role": "user", "content": "go"}], stream=False).json()
        [call] = first["content"]
        assert (first["stop_reason"], call["type"], call["name"]) == (
            "tool_use",
            "tool_use",
            "Bash",
        )
        messages = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": first["content"]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "ok"}],
            },
        ]
        second = ask(model.url, messages, stream=False).json()
        assert second["stop_reason"] == "end_turn"
        assert second["content"] == [{"type": "text", "text": "All green."}]
        assert model.recorder.tool_results() == [
            {"name": "Bash", "content": "ok", "is_error": False}
        ]


def test_the_stream_has_the_messages_api_events_in_order():
    with ModelServer() as model:
        model.play(SCRIPT)
        answer = ask(model.url, [{"role": "user", "content": "go"}], stream=True)
    assert answer.headers["content-type"] == "text/event-stream"
    events = [
        (block.split("\n")[0].removeprefix("event: "), json.loads(block.split("\n")[1][6:]))
        for block in answer.text.strip().split("\n\n")
    ]
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names[1] == "content_block_start" and names[-3] == "content_block_stop"
    deltas = [data["delta"] for name, data in events if name == "content_block_delta"]
    assert len(deltas) > 1 and {d["type"] for d in deltas} == {"input_json_delta"}
    assert json.loads("".join(d["partial_json"] for d in deltas)) == SCRIPT[0][0]["input"]
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_a_side_call_without_tools_does_not_advance_the_script():
    with ModelServer() as model:
        model.play(SCRIPT)
        body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "title?"}]}
        side = httpx.post(f"{model.url}/v1/messages", json=body, timeout=10).json()
        assert side["content"][0]["type"] == "text"
        main = ask(model.url, [{"role": "user", "content": "go"}], stream=False).json()
        assert main["content"][0]["type"] == "tool_use"
