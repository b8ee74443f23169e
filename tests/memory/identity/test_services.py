"""Identity services the review UI uses: agent_create and its name rule, token_issue."""

import pytest

from cairn.errors import ApplicationError
from memory.identity.services import (
    agent_create,
    agent_get_or_create,
    agent_name_clean,
    token_issue,
)
from memory.models import Agent, AuditEvent
from tests.factories.identity import AgentFactory, WorkspaceFactory, person_actor

pytestmark = pytest.mark.django_db


def test_agent_create_records_who_and_why(workspace):
    agent = agent_create(
        workspace=workspace,
        name=" gaia/chat ",
        actor=person_actor("ann"),
        reason="new",
    )
    assert agent.name == "gaia/chat" and agent.workspace == workspace
    event = AuditEvent.objects.get(action="agent.create", target_id=str(agent.pk))
    assert (event.actor, event.reason, event.workspace) == ("user:ann", "new", workspace)


def test_agent_create_refuses_a_taken_name(workspace):
    AgentFactory(workspace=workspace, name="gaia/chat")
    with pytest.raises(ApplicationError) as excinfo:
        agent_create(workspace=workspace, name="gaia/chat", actor=person_actor("ann"))
    assert excinfo.value.code == "duplicate" and excinfo.value.fields == {"name": ["duplicate"]}
    assert Agent.objects.filter(workspace=workspace).count() == 1


@pytest.mark.parametrize("name", ["", "   ", "a b", "tab\there", "x" * 129, "bell\x07"])
def test_agent_names_follow_one_rule(name):
    with pytest.raises(ApplicationError) as excinfo:
        agent_name_clean(name)
    assert excinfo.value.fields == {"name": ["invalid"]}


def test_get_or_create_uses_the_same_rule(workspace):
    with pytest.raises(ApplicationError):
        agent_get_or_create(workspace=workspace, name="two words")
    assert agent_get_or_create(workspace=workspace, name="ok/name").name == "ok/name"


def test_token_issue_records_a_reason_and_refuses_long_labels(workspace):
    agent = AgentFactory(workspace=workspace)
    issued = token_issue(agent=agent, name=" ci ", reason="for CI")
    assert issued.token.name == "ci"
    event = AuditEvent.objects.get(action="token.issue", target_id=str(issued.token.pk))
    assert event.reason == "for CI"
    with pytest.raises(ApplicationError):
        token_issue(agent=agent, name="x" * 101)


def test_the_same_name_may_exist_in_two_workspaces():
    a, b = WorkspaceFactory(), WorkspaceFactory()
    agent_create(workspace=a, name="gaia/chat", actor=person_actor("x"))
    agent_create(workspace=b, name="gaia/chat", actor=person_actor("y"))
    assert Agent.objects.filter(name="gaia/chat").count() == 2


def _fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def test_token_lookup_gives_the_rows_the_orm_gives(workspace):
    """The lookup every request runs is hand-written SQL: its token, agent and
    workspace must be the ORM's, converters included (JSON settings, aware times)."""
    from memory.identity.services import token_lookup, token_revoke
    from memory.models import ApiToken

    workspace.settings = {"store_goal_text": True, "nested": {"a": [1, 2]}}
    workspace.save()
    agent = AgentFactory(workspace=workspace, name="gaia/chat")
    AgentFactory(workspace=WorkspaceFactory(), name="gaia/chat")  # a twin elsewhere
    issued = token_issue(agent=agent, scope="harness")
    token = token_lookup(authorization=f"Bearer {issued.raw}")
    expected = ApiToken.objects.select_related("agent", "workspace").get(pk=issued.token.pk)
    assert _fields(token) == _fields(expected)
    assert _fields(token.agent) == _fields(expected.agent)
    assert _fields(token.workspace) == _fields(expected.workspace)
    assert token.workspace.settings["nested"] == {"a": [1, 2]}
    assert token.created_at.tzinfo is not None and token.scope == "harness"
    assert token.agent.workspace is token.workspace  # no second query for it
    assert token_lookup(authorization=f"Bearer {issued.raw}x") is None
    assert token_lookup(authorization="Bearer nottoken") is None
    token_revoke(token=expected, actor=person_actor("ann"))
    assert token_lookup(authorization=f"Bearer {issued.raw}") is None
