"""Skills browser, skill page (versions, sections, effective preview) and learned facts."""

import re

import pytest

from memory.core.actors import Actor
from memory.skills.consent import delta_approve
from memory.skills.facts import fact_claim, fact_put
from memory.skills.registry import skill_register
from tests.factories.identity import WorkspaceFactory
from tests.factories.skills import (
    USER_INSTRUCTION,
    backed,
    bulk_deltas,
    learning_agent,
    propose,
    register_v2,
    skill_md,
)
from tests.factories.skills import reviewer as make_reviewer
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def agent(workspace):
    return learning_agent(workspace, name="gaia/chat")


@pytest.fixture
def viewer(member_client, workspace):
    return member_client(workspace=workspace, role="viewer")


def _approve(delta, workspace):
    return delta_approve(
        delta=delta,
        actor=Actor.for_user(make_reviewer(workspace, username="approver")),
        reason="ok",
    )


def _row(html: str, skill) -> str:
    start = html.index(f'<tr id="skill-{skill.pk}"')
    return html[start : html.index("</tr>", start)]


# --- the list --------------------------------------------------------------------------


def test_it_lists_skills_with_an_overlay_badge_and_counts(viewer, agent, workspace):
    _approve(propose(agent, "Sign with a first name.", section="drafting-replies"), workspace)
    propose(agent)
    propose(agent, "Forward to x.", provenance={})
    skill_register(
        workspace=workspace,
        skill_md=skill_md(name="weekly-report"),
        actor=Actor.system("test"),
    )
    response = viewer.get("/skills/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and 'id="rows"' in html
    from memory.models import Skill

    triage = Skill.objects.get(workspace=workspace, name="triage-inbox")
    weekly = Skill.objects.get(workspace=workspace, name="weekly-report")
    row = _row(html, triage)
    assert "learned overlay" in row
    assert "active <b>1</b>" in row and "staged <b>1</b>" in row and "quarantined <b>1</b>" in row
    assert "/deltas/staged/?skill=triage-inbox" in row
    plain = _row(html, weekly)
    assert "learned overlay" not in plain and "none yet" in plain


def test_it_serves_the_rows_fragment_to_htmx(viewer, agent):
    html = viewer.get("/skills/", **HX).content.decode()
    assert "<html" not in html and html.lstrip().startswith('<div id="rows"')
    assert "triage-inbox" in html


def test_empty_skills_say_what_to_do(viewer):
    html = viewer.get("/skills/").content.decode()
    assert "No skills registered yet." in html and "POST /api/v1/skills/" in html


def test_the_skill_list_query_count_is_pinned(
    member_client, workspace, agent, django_assert_max_num_queries
):
    for i in range(30):
        skill_register(
            workspace=workspace,
            skill_md=skill_md(name=f"skill-{i:02d}"),
            actor=Actor.system("t"),
        )
    bulk_deltas(agent, 200)
    client = member_client(workspace=workspace, role="viewer")
    client.get("/skills/")
    # session, user, membership, the page (counts annotated), the workspace menu, nav (3)
    with django_assert_max_num_queries(8):
        response = client.get("/skills/")
    assert len(response.context["page"]) == 31


def test_another_workspaces_skills_are_invisible_and_404(viewer, agent):
    other = WorkspaceFactory()
    skill_register(
        workspace=other,
        skill_md=skill_md(name="secret-skill"),
        actor=Actor.system("t"),
    )
    assert "secret-skill" not in viewer.get("/skills/").content.decode()
    assert viewer.get("/skills/secret-skill/").status_code == 404


# --- one skill ---------------------------------------------------------------------------


def test_the_skill_page_shows_versions_sections_and_the_effective_skill(viewer, agent, workspace):
    _approve(propose(agent, "Sign with a first name.", section="drafting-replies"), workspace)
    response = viewer.get("/skills/triage-inbox/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "learned overlay" in html
    assert "<code>escalation</code>" in html and "Drafting replies" in html  # sections
    assert '<code>1.0.0</code> <span class="badge active">current</span>' in html  # versions
    preview = html[html.index('id="preview"') :]
    assert "## Learned adjustments" in preview and "- Sign with a first name." in preview
    assert 'aria-current="true">With learning' in preview
    assert "gaia/chat" in preview


def test_the_base_tab_is_the_authored_text_only(viewer, agent, workspace):
    _approve(propose(agent, "Sign with a first name.", section="drafting-replies"), workspace)
    html = viewer.get(f"/skills/triage-inbox/?agent={agent.pk}&view=base", **HX).content.decode()
    assert html.lstrip().startswith('<section class="card preview" id="preview"')
    assert "<html" not in html
    assert "Learned adjustments" not in html and "identical to the base" in html
    assert "learned=false" in html


def test_the_diff_tab_shows_what_learning_adds(viewer, agent, workspace):
    _approve(
        propose(
            agent, kind="tool-hint", section="triage-inbox", payload={"prefer": ["pre_scan_inbox"]}
        ),
        workspace,
    )
    _approve(propose(agent, "Sign with a first name.", section="drafting-replies"), workspace)
    html = viewer.get(f"/skills/triage-inbox/?agent={agent.pk}&view=diff", **HX).content.decode()
    added = re.findall(
        r'<div class="dl add"[^>]*>.*?<span class="tx"[^>]*>(.*?)</span></div>', html
    )
    removed = re.findall(
        r'<div class="dl del"[^>]*>.*?<span class="tx"[^>]*>(.*?)</span></div>', html
    )
    # The learned line is shown in its own section, not under an appended block.
    assert "- Sign with a first name." in added and "## Learned adjustments" not in added
    assert html.index("Keep replies short and polite.") < html.index("- Sign with a first name.")
    assert "tools: [triage_inbox, summarize_thread, pre_scan_inbox]" in added
    assert removed == ["tools: [triage_inbox, summarize_thread]"]


def test_the_preview_follows_the_chosen_agent(viewer, agent, workspace):
    other = learning_agent(workspace, name="claude-code", register=False)
    _approve(propose(agent, "Gaia's own rule.", section="drafting-replies"), workspace)
    _approve(propose(other, "Claude's own rule.", section="drafting-replies"), workspace)
    mine = viewer.get(f"/skills/triage-inbox/?agent={agent.pk}", **HX).content.decode()
    theirs = viewer.get(f"/skills/triage-inbox/?agent={other.pk}", **HX).content.decode()
    assert (
        "Gaia&#x27;s own rule." in mine and "Claude" not in mine.split('<pre class="skill-text"')[1]
    )
    assert "Claude&#x27;s own rule." in theirs
    # An agent id of another workspace (or garbage) falls back to one that has learned here.
    stranger = learning_agent(WorkspaceFactory(), name="x")
    assert viewer.get(f"/skills/triage-inbox/?agent={stranger.pk}").status_code == 200


def test_a_skill_nobody_learned_on_shows_the_base(viewer, workspace):
    skill_register(workspace=workspace, skill_md=skill_md(), actor=Actor.system("t"))
    html = viewer.get("/skills/triage-inbox/?view=diff").content.decode()
    assert "every agent gets the base text" in html and "No difference" in html


def test_sections_are_compared_with_the_previous_version(viewer, agent, workspace):
    register_v2(workspace)
    html = viewer.get("/skills/triage-inbox/").content.decode()
    sections = html[html.index("Sections of 2.0.0") :]
    assert "vs 1.0.0" in sections
    escalation = sections[sections.index("<code>escalation</code>") :]
    assert escalation.index("changed") < escalation.index("</tr>")
    drafting = sections[sections.index("<code>drafting-replies</code>") :]
    assert drafting.index(">same<") < drafting.index("</tr>")


def test_the_skill_page_query_count_is_pinned(
    member_client, workspace, agent, django_assert_max_num_queries
):
    _approve(propose(agent, "Sign with a first name.", section="drafting-replies"), workspace)
    bulk_deltas(agent, 200, status="active", approved_by="user:x")
    for version in ("1.0.1", "1.0.2", "1.0.3"):
        skill_register(
            workspace=workspace,
            skill_md=skill_md(version=version),
            actor=Actor.system("t"),
        )
    client = member_client(workspace=workspace, role="viewer")
    client.get("/skills/triage-inbox/")
    # session, user, membership, the skill with counts, its agents, the chosen agent,
    # its active deltas, the versions, the workspace menu, nav (3)
    with django_assert_max_num_queries(12):
        client.get("/skills/triage-inbox/")


# --- facts ----------------------------------------------------------------------------------


def test_facts_list_their_consumers_and_inert_ones_are_marked(viewer, agent, workspace):
    read = fact_put(
        channel="agent",
        workspace=workspace,
        agent=agent,
        namespace="priority_senders",
        key="cfo@acme.example",
        value=True,
        provenance=backed(
            agent, USER_INSTRUCTION, said=fact_claim(key="cfo@acme.example", value=True)
        ),
    )[0]
    inert = fact_put(
        channel="agent",
        workspace=workspace,
        agent=agent,
        namespace="tone",
        key="greeting",
        value={"style": "<b>warm</b>"},
        provenance=backed(
            agent, USER_INSTRUCTION, said=fact_claim(key="greeting", value={"style": "<b>warm</b>"})
        ),
    )[0]
    response = viewer.get("/facts/")
    assert response.status_code == 200
    html = response.content.decode()
    read_row = html[html.index(f'id="fact-{read.pk}"') :]
    read_row = read_row[: read_row.index("</tr>")]
    assert "gaia/chat <b>triage_inbox</b>" in read_row and "inert" not in read_row
    inert_row = html[html.index(f'id="fact-{inert.pk}"') :]
    inert_row = inert_row[: inert_row.index("</tr>")]
    assert 'class="badge inert"' in inert_row
    assert "&lt;b&gt;warm&lt;/b&gt;" in inert_row and "<b>warm</b>" not in html
    assert 'aria-current="page"' in html[: html.index("Skills</a>")]  # Skills is the section


def test_facts_show_only_the_current_value(viewer, agent, workspace):
    fact_put(
        channel="agent",
        workspace=workspace,
        agent=agent,
        namespace="tone",
        key="greeting",
        value="hi",
        provenance=backed(agent, USER_INSTRUCTION, said=fact_claim(key="greeting", value="hi")),
    )
    fact_put(
        channel="agent",
        workspace=workspace,
        agent=agent,
        namespace="tone",
        key="greeting",
        value="hello",
        provenance=backed(agent, USER_INSTRUCTION, said=fact_claim(key="greeting", value="hello")),
    )
    html = viewer.get("/facts/", **HX).content.decode()
    assert html.lstrip().startswith('<div id="rows"')
    assert "&quot;hello&quot;" in html and "&quot;hi&quot;" not in html


def test_facts_filter_by_namespace_and_say_what_to_do_when_empty(viewer, agent, workspace):
    assert "No learned facts yet." in viewer.get("/facts/").content.decode()
    fact_put(
        channel="agent",
        workspace=workspace,
        agent=agent,
        namespace="tone",
        key="greeting",
        value="hi",
        provenance=backed(agent, USER_INSTRUCTION, said=fact_claim(key="greeting", value="hi")),
    )
    html = viewer.get("/facts/").content.decode()
    assert '<option value="tone"' in html
    assert "No facts in namespace" in viewer.get("/facts/?namespace=other", **HX).content.decode()


def test_facts_of_another_workspace_are_invisible(viewer, agent):
    other = learning_agent(WorkspaceFactory())
    fact_put(
        channel="agent",
        workspace=other.workspace,
        agent=other,
        namespace="tone",
        key="secret",
        value=1,
        provenance=backed(other, USER_INSTRUCTION, said=fact_claim(key="secret", value=1)),
    )
    assert "secret" not in viewer.get("/facts/").content.decode()


def test_the_facts_query_count_is_pinned(
    member_client, workspace, agent, django_assert_max_num_queries
):
    for i in range(60):
        fact_put(
            channel="agent",
            workspace=workspace,
            agent=agent,
            namespace=f"ns{i % 6}",
            key=f"k{i}",
            value=i,
            provenance=backed(agent, USER_INSTRUCTION, said=fact_claim(key=f"k{i}", value=i)),
        )
    client = member_client(workspace=workspace, role="viewer")
    client.get("/facts/")
    # session, user, membership, the page, consumers, namespaces, menu, nav (3)
    with django_assert_max_num_queries(10):
        response = client.get("/facts/")
    assert len(response.context["page"]) == 50


# --- revert and reset -------------------------------------------------------------------------


def test_a_reviewer_reverts_one_active_delta_from_the_skill_page(member_client, agent, workspace):
    from memory.models import AuditEvent, SkillDelta

    kept = _approve(propose(agent, "Keep this one.", section="drafting-replies"), workspace)
    gone = _approve(propose(agent, "Revert this one."), workspace)
    client = member_client(workspace=workspace, role="reviewer")
    page = client.get(f"/skills/triage-inbox/?agent={agent.pk}").content.decode()
    assert f'action="/skills/triage-inbox/deltas/{gone.pk}/revert/?view=with"' in without_ws(page)
    response = client.post(
        f"/skills/triage-inbox/deltas/{gone.pk}/revert/?view=with", {"reason": "worse"}, **HX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="card preview" id="preview"')
    assert "Revert this one." not in html and "Keep this one." in html
    assert f'id="applied-{gone.pk}"' not in html and f'id="applied-{kept.pk}"' in html
    assert "reverted" in html  # the toast
    assert SkillDelta.objects.get(pk=gone.pk).status == "archived"
    assert AuditEvent.objects.get(action="delta.revert", target_id=str(gone.pk)).reason == "worse"


def test_reverting_needs_a_reason_and_without_htmx_redirects(member_client, agent, workspace):
    from memory.models import SkillDelta

    delta = _approve(propose(agent), workspace)
    client = member_client(workspace=workspace, role="reviewer")
    url = f"/skills/triage-inbox/deltas/{delta.pk}/revert/?view=diff"
    response = client.post(url, {"reason": ""}, **HX)
    assert response.status_code == 422 and "Say why" in response.content.decode()
    assert SkillDelta.objects.get(pk=delta.pk).status == "active"
    response = client.post(url, {"reason": "no longer true"})
    assert response.status_code == 303
    assert without_ws(response["Location"]) == f"/skills/triage-inbox/?agent={agent.pk}&view=diff"
    assert SkillDelta.objects.get(pk=delta.pk).status == "archived"


def test_a_reviewer_resets_an_agent_to_the_authored_skill(member_client, agent, workspace):
    from memory.models import SkillDelta

    other = learning_agent(workspace, name="claude-code", register=False)
    _approve(propose(agent, "Mine."), workspace)
    propose(agent, "Pending.", section="drafting-replies")
    theirs = _approve(propose(other, "Theirs."), workspace)
    client = member_client(workspace=workspace, role="reviewer")
    response = client.post(
        f"/skills/triage-inbox/reset/?agent={agent.pk}&view=with", {"reason": "start over"}, **HX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "2 learned deltas of gaia/chat on triage-inbox archived" in html
    assert "Learned adjustments" not in html.split('<pre class="skill-text"')[1]
    assert set(SkillDelta.objects.filter(agent=agent).values_list("status", flat=True)) == {
        "archived"
    }
    assert SkillDelta.objects.get(pk=theirs.pk).status == "active"


def test_viewers_cannot_revert_or_reset_and_see_no_buttons(viewer, agent, workspace):
    from memory.models import SkillDelta

    delta = _approve(propose(agent), workspace)
    page = viewer.get(f"/skills/triage-inbox/?agent={agent.pk}").content.decode()
    assert "/revert/" not in page and "/reset/" not in page
    url = f"/skills/triage-inbox/deltas/{delta.pk}/revert/"
    assert viewer.post(url, {"reason": "x"}, **HX).status_code == 403
    url = f"/skills/triage-inbox/reset/?agent={agent.pk}"
    assert viewer.post(url, {"reason": "x"}, **HX).status_code == 403
    assert SkillDelta.objects.get(pk=delta.pk).status == "active"


def test_revert_and_reset_are_scoped_to_the_workspace(member_client, agent, workspace):
    from memory.models import SkillDelta

    other = learning_agent(WorkspaceFactory())
    theirs = _approve(propose(other), other.workspace)
    client = member_client(workspace=workspace, role="admin")
    url = f"/skills/triage-inbox/deltas/{theirs.pk}/revert/"
    assert client.post(url, {"reason": "x"}, **HX).status_code == 404
    url = f"/skills/triage-inbox/reset/?agent={other.pk}"
    assert client.post(url, {"reason": "x"}, **HX).status_code == 404
    assert SkillDelta.objects.get(pk=theirs.pk).status == "active"
