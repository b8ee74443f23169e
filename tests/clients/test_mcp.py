"""cairn-mcp driven by the official mcp client library over stdio, against a live
Cairn: the model-facing tools and nothing that reports outcomes or person evidence;
remember then recall; a refused write comes back as a tool error with the server's
message; and the server will not start with a harness token."""

from __future__ import annotations

import subprocess

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from memory.models import ConfidenceChange, Knowledge
from tests.clients.conftest import run_async, script

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = {
    "remember",
    "recall",
    "forget",
    "context",
    "lessons_check",
    "propose_lesson",
    "propose_delta",
    "effective_skill",
    "search_conversations",
    "cite_turns",
}


def _session(env, work):
    async def run():
        params = StdioServerParameters(command=script("cairn-mcp"), args=[], env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await work(session)

    return run_async(run())


def test_it_lists_only_the_model_facing_tools(harness_env):
    tools = _session(harness_env, lambda s: s.list_tools())
    names = {tool.name for tool in tools.tools}
    assert names == TOOLS
    assert not names & {"post_outcome", "outcome", "evidence", "feedback", "confirm"}
    assert all(tool.description and len(tool.description) > 40 for tool in tools.tools)


def test_it_remembers_and_recalls(harness_env):
    async def work(session):
        stored = await session.call_tool("remember", {"content": "CI runs on Debian 12 images."})
        found = await session.call_tool("recall", {"query": "what OS does CI run on"})
        return stored, found

    stored, found = _session(harness_env, work)
    assert not stored.isError and stored.content[0].text.startswith("remembered as #")
    item = Knowledge.objects.get()
    # Text only: Claude Code would show the model structuredContent instead of the text.
    assert stored.structuredContent is None and found.structuredContent is None
    assert stored.content[0].text == f"remembered as #{item.pk}"
    assert not found.isError and found.content[0].text.startswith(f"#{item.pk} [fact]")
    assert not ConfidenceChange.objects.exists()


def test_a_refused_write_is_a_tool_error_with_the_servers_message(harness_env):
    async def work(session):
        return await session.call_tool(
            "remember",
            {"content": "the deploy token is ghp_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"},
        )

    refused = _session(harness_env, work)
    assert refused.isError
    assert (
        "credential" in refused.content[0].text and "credential_refused" in refused.content[0].text
    )
    assert not Knowledge.objects.exists()


def test_it_refuses_to_start_with_a_harness_token(harness_env):
    env = {**harness_env, "CAIRN_TOKEN": harness_env["CAIRN_HARNESS_TOKEN"]}
    result = subprocess.run(
        [script("cairn-mcp")], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "agent-scoped token" in result.stderr


def test_it_starts_while_cairn_is_down_and_its_tools_say_so(harness_env):
    env = {**harness_env, "CAIRN_URL": "http://127.0.0.1:9"}

    async def work(session):
        tools = await session.list_tools()
        answer = await session.call_tool("recall", {"query": "anything"})
        return tools, answer

    tools, answer = _session(env, work)
    assert {tool.name for tool in tools.tools} == TOOLS
    assert answer.isError and "Cairn is unreachable" in answer.content[0].text


def test_propose_delta_takes_an_object_and_a_rationale_and_counts_a_repeat(harness_env, tokens):
    from cairn_client import Cairn

    from memory.models import SkillDelta
    from tests.factories.skills import skill_md

    url = harness_env["CAIRN_URL"]
    agent = Cairn(url=url, token=tokens["agent"])
    agent.register_skill(skill_md())
    Cairn(url=url, token=tokens["harness"]).store_turn(
        "s-mail",
        role="user",
        # The person's own sentence, word for word: the delta is backed (SPEC section 6).
        content="Thanks. Escalate anything from the CFO after 48 hours.",
        turn_index=3,
    )
    delta = {
        "skill": "triage-inbox",
        "kind": "preference",
        "section": "escalation",
        "payload": {"body": "Escalate anything from the CFO after 48 hours."},
        "rationale": "The user asked for it in so many words.",
    }

    async def work(session):
        cited = await session.call_tool("cite_turns", {"words": "escalate the CFO"})
        turns = [cited.content[0].text.split(":")[0]]
        first = await session.call_tool("propose_delta", {**delta, "turns": turns})
        again = await session.call_tool("propose_delta", {**delta, "turns": turns})
        return cited, first, again

    cited, first, again = _session(harness_env, work)
    assert cited.content[0].text.startswith("s-mail#3: ")
    assert not first.isError, first.content[0].text
    stored = SkillDelta.objects.get()
    assert first.content[0].text == f"delta #{stored.pk} staged"
    assert stored.rationale == "The user asked for it in so many words."
    assert stored.payload["body"] == "Escalate anything from the CFO after 48 hours."
    assert stored.provenance["turns"] == ["s-mail#3"]
    assert not again.isError
    assert f"delta #{stored.pk} staged (proposed 2 times" in again.content[0].text
    stored.refresh_from_db()
    assert stored.proposals == 2 and SkillDelta.objects.count() == 1


def test_an_incognito_session_stores_nothing(harness_env):
    async def work(session):
        return await session.call_tool("remember", {"content": "CI runs on Debian 12 images."})

    stored = _session({**harness_env, "CAIRN_INCOGNITO": "1"}, work)
    assert not stored.isError
    assert stored.content[0].text == "incognito session: nothing was stored"
    assert not Knowledge.objects.exists()
