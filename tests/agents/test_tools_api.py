"""GET/PUT /api/v1/agents/me/tools/: the agent's declared tool registry."""

import pytest

from memory.models import AgentTool
from tests.factories.skills import EMAIL_TOOLS, declare_tools

pytestmark = pytest.mark.django_db


def test_it_replaces_the_tool_registry(api):
    declare_tools(api)
    response = declare_tools(api, [{"name": "triage_inbox", "reads_facts": ["vip", "vip"]}])
    assert response.json() == {
        "tools": [
            {
                "name": "triage_inbox",
                "mutating": False,
                "needs_confirmation": False,
                "reads_facts": ["vip"],
            }
        ]
    }
    assert api.get("/api/v1/agents/me/tools/").json() == response.json()
    assert AgentTool.objects.filter(agent=api.agent).count() == 1


def test_the_registry_refuses_duplicates_and_bad_shapes(api):
    duplicate = api.put(
        "/api/v1/agents/me/tools/", {"tools": [{"name": "a"}, {"name": "a"}]}, format="json"
    )
    assert duplicate.status_code == 400
    assert "tools[1].name" in duplicate.json()["error"]["fields"]
    nameless = api.put("/api/v1/agents/me/tools/", {"tools": [{"mutating": True}]}, format="json")
    assert nameless.status_code == 400
    bad_ns = api.put(
        "/api/v1/agents/me/tools/",
        {"tools": [{"name": "a", "reads_facts": ["Bad NS"]}]},
        format="json",
    )
    assert bad_ns.status_code == 400
    assert AgentTool.objects.count() == 0


def test_each_agent_has_its_own_registry(api, make_api):
    declare_tools(api)
    other = make_api(workspace=api.agent.workspace)
    assert other.get("/api/v1/agents/me/tools/").json() == {"tools": []}
    assert len(api.get("/api/v1/agents/me/tools/").json()["tools"]) == len(EMAIL_TOOLS)
