"""The header's search: lessons, knowledge, deltas and outcomes of this workspace."""

import pytest

from tests.factories.identity import AgentFactory, WorkspaceFactory
from tests.factories.knowledge import KnowledgeFactory
from tests.factories.lessons import LessonFactory
from tests.factories.review import OutcomeFactory
from tests.factories.skills import learning_agent, propose

pytestmark = pytest.mark.django_db


def test_it_finds_each_kind_and_links_each_hit(member_client, workspace):
    viewer = member_client(workspace=workspace, role="viewer")
    lesson = LessonFactory(workspace=workspace, text="Run pytest from the repository root.")
    item = KnowledgeFactory(workspace=workspace, content="The pytest cache lives in .pytest_cache.")
    delta = propose(learning_agent(workspace, name="gaia/chat"), "Mention pytest exit codes.")
    outcome = OutcomeFactory(
        workspace=workspace, agent=AgentFactory(workspace=workspace), outcome_id="pytest-run-7"
    )
    response = viewer.get("/search/?q=pytest")
    html = response.content.decode()
    assert response.status_code == 200 and html.count("<h1") == 1
    q = f"?ws={workspace.name}"
    assert f'href="/lessons/{lesson.pk}/{q}"' in html
    assert f'href="/knowledge/{item.pk}/{q}"' in html
    assert f'href="/deltas/{delta.pk}/{q}"' in html
    assert f'href="/outcomes/{outcome.pk}/{q}"' in html
    assert 'id="header-q"' in html  # the box is in every page's header


def test_the_results_fragment_for_htmx_and_nothing_from_other_workspaces(member_client, workspace):
    viewer = member_client(workspace=workspace, role="viewer")
    LessonFactory(workspace=WorkspaceFactory(), text="Run pytest elsewhere.")
    html = viewer.get("/search/?q=pytest", HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="results">') and "<html" not in html
    assert "Run pytest elsewhere." not in html and "No lesson mentions it." in html


def test_an_empty_search_says_what_to_type(member_client, workspace):
    viewer = member_client(workspace=workspace, role="viewer")
    assert "Type a word or an id." in viewer.get("/search/").content.decode()
