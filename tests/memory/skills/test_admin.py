"""The interim review surfaces: the delta_review command and the Django admin."""

import pytest

from memory.core.actors import Actor
from memory.models import AuditEvent, Role, SkillDelta
from memory.skills.deltas import delta_create
from memory.skills.registry import agent_tools_set, skill_register
from tests.factories.identity import AgentFactory, WorkspaceFactory
from tests.factories.skills import EMAIL_TOOLS, backed, reviewer, skill_md

pytestmark = pytest.mark.django_db

USER = {"source": "user_instruction", "turns": ["s1#1"]}


@pytest.fixture
def agent(workspace):
    agent = AgentFactory(workspace=workspace)
    skill_register(workspace=workspace, skill_md=skill_md(), actor=Actor.system("test"))
    agent_tools_set(agent=agent, tools=EMAIL_TOOLS)
    return agent


def pref(
    agent, text="Escalate CFO threads after 48 hours.", provenance=USER, section="escalation", **kw
):
    return delta_create(
        channel="agent",
        agent=agent,
        skill_name="triage-inbox",
        kind="preference",
        anchor={"section": section},
        payload={"body": text},
        provenance=backed(agent, provenance, said=text),
        **kw,
    ).delta


def test_the_delta_review_command_approves_through_the_service(agent, workspace, capsys):
    from django.core.management import CommandError, call_command

    delta = pref(agent)
    person = reviewer(workspace)
    call_command("delta_review", "list", workspace.name, status="staged")
    assert f"{delta.pk}\tstaged" in capsys.readouterr().out
    viewer = reviewer(workspace, role=Role.VIEWER)
    with pytest.raises(CommandError):
        call_command("delta_review", "approve", str(delta.pk), user=viewer.username)
    call_command("delta_review", "approve", str(delta.pk), user=person.username, reason="ok")
    assert f"delta {delta.pk}: active" in capsys.readouterr().out
    assert AuditEvent.objects.filter(action="delta.approve", reason="ok").exists()


def test_a_workspace_admin_approves_in_the_django_admin(agent, workspace, client):
    delta = pref(agent)
    foreign = WorkspaceFactory()
    foreign_agent = AgentFactory(workspace=foreign)
    skill_register(workspace=foreign, skill_md=skill_md(), actor=Actor.system("t"))
    hidden = pref(foreign_agent)
    admin_user = reviewer(workspace, role=Role.ADMIN)
    client.force_login(admin_user)
    listing = client.get("/admin/memory/skilldelta/")
    assert listing.status_code == 200
    assert f'value="{delta.pk}"' in listing.content.decode()
    assert f'value="{hidden.pk}"' not in listing.content.decode()
    client.post(
        "/admin/memory/skilldelta/",
        {"action": "approve", "_selected_action": [delta.pk]},
    )
    assert SkillDelta.objects.get(pk=delta.pk).status == "active"
    assert SkillDelta.objects.get(pk=hidden.pk).status == "staged"
