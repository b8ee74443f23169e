"""Outcomes screens: turns with filters, and one turn with its steps, checks and verdict."""

import pytest

from memory.models import Outcome
from tests.factories.identity import AgentFactory, WorkspaceFactory
from tests.factories.lessons import BLOG, LessonFactory, check, digest, step
from tests.factories.review import LessonEvidenceFactory, OutcomeFactory
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def viewer(member_client, workspace):
    return member_client(workspace=workspace, role="viewer")


def test_it_lists_turns_as_a_full_page(viewer, workspace):
    outcome = OutcomeFactory(workspace=workspace, session_id="sess-42", turn_index=3)
    response = viewer.get("/outcomes/")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    assert 'name="agent"' in html and 'name="passed"' in html
    row = html[html.index(f'id="outcome-{outcome.pk}"') :]
    row = row[: row.index("</tr>")]
    # Turns are counted from 1 for people (turn_index 3 is the fourth turn).
    assert "<code>sess-42</code></a> · turn 4" in row
    assert f"<code>{outcome.agent.name}</code>" in row
    assert '<span class="badge passed">passed</span>' in row
    assert "1 · 1" in row  # steps · checks
    assert digest()[:10] in row


def test_it_serves_the_rows_fragment_to_htmx(viewer, workspace):
    outcome = OutcomeFactory(workspace=workspace)
    html = viewer.get("/outcomes/", **HX).content.decode()
    assert html.lstrip().startswith('<div id="rows"')
    assert "<html" not in html and f'id="outcome-{outcome.pk}"' in html


def test_it_filters_by_agent_session_project_and_verdict(viewer, workspace):
    other_agent = AgentFactory(workspace=workspace, name="gaia/other")
    passed = OutcomeFactory(workspace=workspace, session_id="s1")
    failed = OutcomeFactory(workspace=workspace, session_id="s2", passed=False)
    unverified = OutcomeFactory(
        workspace=workspace, agent=other_agent, passed=None, project_digest=digest(BLOG)
    )

    def shown(query):
        html = viewer.get(f"/outcomes/?{query}", **HX).content.decode()
        return {o.pk for o in (passed, failed, unverified) if f'id="outcome-{o.pk}"' in html}

    assert shown("") == {passed.pk, failed.pk, unverified.pk}
    assert shown(f"agent={other_agent.pk}") == {unverified.pk}
    assert shown("session=s2") == {failed.pk}
    assert shown(f"project={digest(BLOG)}") == {unverified.pk}
    assert shown("passed=yes") == {passed.pk}
    assert shown("passed=no") == {failed.pk}
    assert shown("passed=unverified") == {unverified.pk}
    assert shown("agent=nope&passed=maybe") == {passed.pk, failed.pk, unverified.pk}


def test_empty_states_say_what_to_do(viewer, workspace):
    assert "POST /api/v1/outcomes/" in viewer.get("/outcomes/").content.decode()
    OutcomeFactory(workspace=workspace)
    html = viewer.get("/outcomes/?session=nope", **HX).content.decode()
    assert "No outcomes match these filters." in html


def test_a_turn_shows_its_steps_checks_and_why_it_passed(viewer, workspace):
    outcome = OutcomeFactory(
        workspace=workspace,
        turn_index=0,
        approach=[
            step("edit:src/app.py", "src/app.py", "ok", 1, mutated=True),
            step("pytest:.", "tests", "ok", 2),
        ],
        checks=[check(2, 0), check(2, None, ran=False, kind="lint", label="ruff")],
        reported_passed=True,
    )
    response = viewer.get(f"/outcomes/{outcome.pk}/")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    # The first turn (turn_index 0) is turn 1 for people, never "Turn 0".
    assert "Turn 1 of <code" in html and "Turn 0" not in html
    assert (
        "<strong>Passed: latest pytest run exited 0 at step 2, after the last edit at step 1 "
        "(edit:src/app.py).</strong>" in html
    )
    assert "1 check did not run and was ignored." in html
    assert "said passed=true (ignored)" in html
    assert '<tr class="last-edit"' in html
    assert '<span class="badge role-counts">counts</span>' in html
    assert '<span class="badge role-not-run">not run</span>' in html
    assert '<code>edit:src/app.py</code> <span class="badge edit"' in html
    # The badge says what it means; "edit:src/app.py edit" read as a stutter.
    assert ">changed files</span>" in html and "</code> edit" not in html


def test_a_turn_is_also_an_htmx_fragment(viewer, workspace):
    outcome = OutcomeFactory(workspace=workspace)
    html = viewer.get(f"/outcomes/{outcome.pk}/", **HX).content.decode()
    assert html.lstrip().startswith('<div id="outcome-detail">') and "<html" not in html


def test_a_turn_links_what_it_confirmed_contradicted_and_taught(viewer, workspace):
    confirmed = LessonFactory(workspace=workspace, text="Run pytest from the root.")
    learned = LessonFactory(workspace=workspace)
    outcome = OutcomeFactory(
        workspace=workspace,
        in_play=[{"type": "lesson", "id": confirmed.pk}, {"type": "knowledge", "id": 7}],
        response={
            "confirmed": [{"type": "lesson", "id": confirmed.pk}],
            "contradicted": [{"type": "knowledge", "id": 7}],
            "lessons_created": [learned.pk],
        },
    )
    LessonEvidenceFactory(lesson=confirmed, outcome=outcome)
    html = viewer.get(f"/outcomes/{outcome.pk}/").content.decode()
    assert (
        f'<a class="chip ok" href="/lessons/{confirmed.pk}/">lesson #{confirmed.pk}</a>'
        in without_ws(html)
    )
    assert (
        f'<a class="chip new" href="/lessons/{learned.pk}/">lesson #{learned.pk}</a>'
        in without_ws(html)
    )
    assert '<a class="chip bad" href="/knowledge/7/">knowledge #7</a>' in without_ws(html)
    assert (
        f'href="/lessons/{confirmed.pk}/">#{confirmed.pk} Run pytest from the root.</a>'
        in without_ws(html)
    )


def test_an_unverified_turn_says_nothing_was_confirmed(viewer, workspace):
    outcome = OutcomeFactory(workspace=workspace, checks=[], passed=None)
    html = viewer.get(f"/outcomes/{outcome.pk}/").content.decode()
    assert "Not verified: no checks were recorded" in html
    assert "a turn that verified nothing neither confirms nor contradicts anything" in html


def test_other_workspaces_outcomes_are_invisible(viewer):
    foreign = OutcomeFactory(workspace=WorkspaceFactory())
    assert viewer.get(f"/outcomes/{foreign.pk}/").status_code == 404
    assert viewer.get("/outcomes/999999999/").status_code == 404
    assert f'id="outcome-{foreign.pk}"' not in viewer.get("/outcomes/", **HX).content.decode()
    # Its agent is not offered in the filter either.
    assert foreign.agent.name not in viewer.get("/outcomes/").content.decode()


@pytest.mark.parametrize("role", ["viewer", "reviewer", "admin"])
def test_every_role_reads_outcomes(member_client, workspace, role):
    outcome = OutcomeFactory(workspace=workspace)
    client = member_client(workspace=workspace, role=role)
    assert client.get("/outcomes/").status_code == 200
    assert client.get(f"/outcomes/{outcome.pk}/").status_code == 200


def test_the_list_stays_bounded_at_10000_outcomes(viewer, workspace, django_assert_max_num_queries):
    agents = [AgentFactory(workspace=workspace) for _ in range(3)]
    big_approach = [step(f"op:{i}", f"file{i}.py", "ok", i, mutated=i % 2 == 0) for i in range(12)]
    Outcome.objects.bulk_create(
        [
            Outcome(
                workspace=workspace,
                agent=agents[i % 3],
                outcome_id=f"o-{i}",
                session_id=f"s-{i // 10}",
                turn_index=i % 10,
                project_digest=digest() if i % 2 else digest(BLOG),
                approach=big_approach,
                checks=[check(13, 0)],
                passed=[True, False, None][i % 3],
                response={"confirmed": [], "contradicted": [], "lessons_created": []},
            )
            for i in range(10_000)
        ],
        batch_size=1_000,
    )
    viewer.get("/outcomes/")
    # session, user, membership, page (agents joined), its project labels, nav counters
    # (3), memberships, the filter's agents, projects and their labels
    with django_assert_max_num_queries(12):
        response = viewer.get("/outcomes/")
    page = response.context["page"]
    assert len(page) == 50 and page.next_query
    assert page.items[0].approach_count == 12
    query = page.next_query
    for _ in range(5):
        with django_assert_max_num_queries(5):
            page = viewer.get(f"/outcomes/{query}", **HX).context["page"]
        query = page.next_query
    for query in ("?passed=no", "?session=s-42", f"?agent={agents[1].pk}&passed=no"):
        with django_assert_max_num_queries(5):
            filtered = viewer.get(f"/outcomes/{query}", **HX)
        assert len(filtered.context["page"]) > 0


def test_each_turn_shows_who_reported_it_and_filters_by_it(viewer, workspace):
    agent = AgentFactory(workspace=workspace)
    harness = OutcomeFactory(workspace=workspace, agent=agent, channel="harness")
    told = OutcomeFactory(workspace=workspace, agent=agent, channel="agent")
    html = viewer.get("/outcomes/").content.decode()
    assert "as the harness saw it" not in html
    harness_cell = html[html.index(f'data-testid="channel-{harness.pk}"') :]
    assert "harness-verified" in harness_cell[:300] and "self-report" not in harness_cell[:300]
    told_cell = html[html.index(f'data-testid="channel-{told.pk}"') :]
    assert "self-report" in told_cell[:300]
    only = viewer.get("/outcomes/?channel=agent", HTTP_HX_REQUEST="true").content.decode()
    assert f'id="outcome-{told.pk}"' in only and f'id="outcome-{harness.pk}"' not in only
    only = viewer.get("/outcomes/?channel=harness").content.decode()
    assert f'id="outcome-{harness.pk}"' in only and f'id="outcome-{told.pk}"' not in only
    assert '<option value="harness" selected>' in only
    # An unknown channel is no filter at all.
    both = viewer.get("/outcomes/?channel=nonsense").content.decode()
    assert f'id="outcome-{harness.pk}"' in both and f'id="outcome-{told.pk}"' in both


def test_an_agent_reported_turn_says_it_is_a_self_report(viewer, workspace):
    told = OutcomeFactory(
        workspace=workspace, agent=AgentFactory(workspace=workspace), channel="agent"
    )
    html = viewer.get(f"/outcomes/{told.pk}/").content.decode()
    assert 'data-testid="self-report"' in html and "worth nothing as evidence" in html
