"""Situations in the review UI: per turn on the outcome page (with the cost line),
"Known blockers" per machine with remove, and the dashboard counts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from memory.models import AuditEvent, SituationLesson
from tests.factories.identity import AgentFactory, api_client
from tests.factories.review import OutcomeFactory
from tests.factories.situations import (
    MACHINE,
    SituationLessonFactory,
    gh_logged_out,
    result_ok,
)
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def viewer(member_client, workspace):
    return member_client(workspace=workspace, role="viewer")


@pytest.fixture
def reviewer(member_client, workspace):
    return member_client(workspace=workspace, role="reviewer")


def _blocked_turn(agent, turn_id: str):
    """gh logged out at t0; three workarounds; escalation at t0 + 94 s."""
    harness = api_client(agent, scope="harness")
    t0 = timezone.now() - timedelta(minutes=5)
    result_ok(
        harness, turn_id, tool="check_cli_setup", ok=False, situation=gh_logged_out(),
        at=t0.isoformat(),
    )  # fmt: skip
    for n, tool in enumerate(["fetch_page", "curl", "run_python"], start=1):
        at = t0 + timedelta(seconds=30 * n + (4 if n == 3 else 0))
        result_ok(harness, turn_id, tool=tool, ok=False, at=at.isoformat())


def test_the_outcome_page_shows_the_turns_situations_and_cost_line(viewer, workspace):
    agent = AgentFactory(workspace=workspace)
    outcome = OutcomeFactory(workspace=workspace, agent=agent, outcome_id="run-7-turn-2")
    _blocked_turn(agent, "run-7-turn-2")
    response = viewer.get(f"/outcomes/{outcome.pk}/")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    assert "3 steps · 94 s after gh was blocked, before asking" in html
    assert "To unblock: run `gh auth login`, then ask me again." in html
    # The contract's last line is left for the agent: the page says so, instead of a
    # bare "Meanwhile I can:" dangling at the end.
    assert "its last line is the agent’s to finish" in html
    for event in ("detected", "workaround", "escalated", "lesson_stored"):
        assert f'<span class="badge">{event}</span>' in html
    fragment = viewer.get(f"/outcomes/{outcome.pk}/", **HX).content.decode()
    assert "<html" not in fragment and 'data-testid="cost-line"' in fragment


def test_an_outcome_without_posted_results_says_how_to_get_them(viewer, workspace):
    outcome = OutcomeFactory(workspace=workspace)
    html = viewer.get(f"/outcomes/{outcome.pk}/").content.decode()
    assert f"/api/v1/turns/{outcome.outcome_id}/results/" in html
    assert 'data-testid="cost-line"' not in html


def test_known_blockers_are_listed_per_machine(viewer, workspace):
    agent = AgentFactory(workspace=workspace)
    gh = SituationLessonFactory(agent=agent)
    SituationLessonFactory(agent=agent, machine_digest="m-laptop", subject="docker",
                           kind="not_installed")  # fmt: skip
    ended = SituationLessonFactory(agent=agent, subject="aws", state="superseded",
                                   end_reason="probe_clear")  # fmt: skip
    SituationLessonFactory(subject="elsewhere")  # another workspace
    response = viewer.get("/situations/")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    assert html.count('data-testid="blocker"') == 2
    assert f'Machine <code title="{MACHINE}">' in html and "m-laptop" in html
    assert f'id="blocker-{gh.pk}"' in html and f'id="blocker-{ended.pk}"' not in html
    assert "Remove…" not in html  # viewers read only
    # The probe's arguments in words, not a Python dict ({'binary': 'gh'}).
    assert '<code>check_cli_setup</code> <span class="hint">binary: gh</span>' in html
    assert "&#x27;binary&#x27;" not in html
    fragment = viewer.get("/situations/", {"machine": "m-laptop"}, **HX).content.decode()
    assert fragment.lstrip().startswith('<div id="rows">') and "<html" not in fragment
    assert fragment.count('data-testid="blocker"') == 1 and "docker" in fragment
    everything = viewer.get("/situations/", {"state": "all"}).content.decode()
    assert f'id="blocker-{ended.pk}"' in everything and "probe_clear" in everything


def test_a_reviewer_removes_a_known_blocker_with_a_reason(reviewer, workspace):
    lesson = SituationLessonFactory(agent=AgentFactory(workspace=workspace))
    assert "Remove…" in reviewer.get("/situations/").content.decode()
    missing = reviewer.post(f"/situations/{lesson.pk}/remove/", {"reason": ""}, **HX)
    assert missing.status_code == 422
    response = reviewer.post(
        f"/situations/{lesson.pk}/remove/", {"reason": "signed in by hand"}, **HX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert f'id="blocker-{lesson.pk}"' in html and "removed" in html and "Remove…" not in html
    lesson.refresh_from_db()
    assert (lesson.state, lesson.end_reason) == ("removed", "removed")
    audit = AuditEvent.objects.get(action="situation_lesson.remove")
    assert audit.reason == "signed in by hand" and audit.actor.startswith("user:")
    api = api_client(lesson.agent)
    assert api.get("/api/v1/situations/known/", {"machine": MACHINE}).json()["blockers"] == []


def test_remove_without_htmx_redirects_back(reviewer, workspace):
    lesson = SituationLessonFactory(agent=AgentFactory(workspace=workspace))
    response = reviewer.post(f"/situations/{lesson.pk}/remove/", {"reason": "fixed"})
    assert response.status_code == 303 and without_ws(response["Location"]) == "/situations/"
    assert SituationLesson.objects.get(pk=lesson.pk).state == "removed"


def test_a_viewer_cannot_remove_and_other_workspaces_are_404(viewer, member_client, workspace):
    lesson = SituationLessonFactory(agent=AgentFactory(workspace=workspace))
    assert viewer.post(f"/situations/{lesson.pk}/remove/", {"reason": "x"}).status_code == 403
    foreign = SituationLessonFactory()
    reviewer = member_client(workspace=workspace, role="reviewer")
    assert reviewer.post(f"/situations/{foreign.pk}/remove/", {"reason": "x"}).status_code == 404
    assert SituationLesson.objects.filter(state="active").count() == 2
    assert reviewer.get(f"/situations/{lesson.pk}/remove/").status_code == 405


def test_remove_needs_the_csrf_token(workspace):
    from memory.identity.services import user_create

    user, _ = user_create(workspace=workspace, username="rev", role="reviewer", password="pw")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    lesson = SituationLessonFactory(agent=AgentFactory(workspace=workspace))
    assert client.post(f"/situations/{lesson.pk}/remove/", {"reason": "x"}).status_code == 403
    assert SituationLesson.objects.get(pk=lesson.pk).state == "active"


def test_the_dashboard_counts_blocked_turns_and_median_steps(viewer, workspace):
    agent = AgentFactory(workspace=workspace)
    _blocked_turn(agent, "a")
    _blocked_turn(agent, "b")
    result_ok(api_client(agent, scope="harness"), "fine", tool="ls", ok=True)
    html = viewer.get("/dashboard/").content.decode()
    assert '<span class="num warn" data-testid="blocked-turns">2</span>' in html
    # The first turn escalated after 3 steps and stored a lesson; the second matched it
    # and escalated at once (0): the median is 1.5.
    assert 'data-testid="median-steps-to-escalate">1.5</span>' in html
    assert 'data-testid="known-blockers">1</span>' in html


def test_the_known_blockers_page_query_count_is_pinned(
    viewer, workspace, django_assert_max_num_queries
):
    agent = AgentFactory(workspace=workspace)
    for n in range(30):
        SituationLessonFactory(agent=agent, subject=f"tool{n}", machine_digest=f"m-{n % 3}")
    viewer.get("/situations/")
    # session, user, membership, the page (+ count), memberships, nav counters
    with django_assert_max_num_queries(12):
        assert viewer.get("/situations/").status_code == 200
