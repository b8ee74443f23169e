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
    assert stored.structuredContent["id"] == item.pk
    assert not found.isError and f"#{item.pk}" in found.content[0].text
    assert found.structuredContent["results"][0]["id"] == item.pk
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
