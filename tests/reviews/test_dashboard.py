from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import JobRun
from tests.factories.core import JobRunFactory
from tests.factories.identity import WorkspaceFactory
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db


def test_it_redirects_anonymous_people_to_login(client):
    response = client.get("/dashboard/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_the_login_page_renders(client):
    response = client.get("/login/")
    assert response.status_code == 200
    assert b"Log in to Cairn" in response.content


@pytest.mark.parametrize("role", ["viewer", "reviewer", "admin"])
def test_every_role_sees_the_dashboard_with_next_steps(member_client, workspace, role):
    client = member_client(workspace=workspace, role=role)
    response = client.get("/dashboard/")
    assert response.status_code == 200
    html = response.content.decode()
    assert workspace.display_name in html
    assert 'curl -s -H "Authorization: Bearer $CAIRN_TOKEN"' in html
    assert 'hx-headers=\'{"X-CSRFToken":' in html
    assert "htmx-2.0.11.min.js" in html


def test_a_user_without_membership_gets_a_clear_403(client, django_user_model):
    user = django_user_model.objects.create_user("loner", password="x")
    client.force_login(user)
    assert client.get("/").status_code == 403
    assert client.get("/dashboard/").status_code == 403


def test_switching_to_a_workspace_you_are_not_in_is_refused(member_client, workspace):
    client = member_client(workspace=workspace, role="viewer")
    other = WorkspaceFactory()
    response = client.post("/workspace/switch/", {"workspace": other.pk})
    assert response.status_code == 400
    assert other.display_name not in client.get("/dashboard/").content.decode()


def test_switching_between_own_workspaces(member_client, workspace):
    from memory.identity.services import user_create

    client = member_client(workspace=workspace, role="viewer")
    second = WorkspaceFactory()
    user_create(workspace=second, username=client.user.username, role="viewer")
    response = client.post("/workspace/switch/", {"workspace": second.pk})
    assert response.status_code == 302
    assert second.display_name in client.get("/dashboard/").content.decode()


def test_the_dashboard_query_count_is_pinned(
    member_client, workspace, django_assert_max_num_queries
):
    JobRun.objects.bulk_create(
        [JobRun(workspace=workspace, kind="decay", status="succeeded") for _ in range(300)]
    )
    client = member_client(workspace=workspace, role="admin")
    client.get("/dashboard/")
    # session, user, membership, 3 counts, the chart's one aggregate, memberships,
    # 4 nav counters (tokens, jobs, delta queues, open contradictions), skill KPIs (3),
    # orphan notices, and memory health: lesson health, review latency, lessons per
    # day, lessons learned / retired (one aggregate, the Lessons filter's rule), 2
    # histograms; situations: turn totals, steps to escalate, known blockers; the first
    # hour's checklist (one aggregate)
    with django_assert_max_num_queries(26):
        client.get("/dashboard/")


def test_the_dashboard_charts_job_runs_per_day(member_client, workspace):
    now = timezone.now()
    # Oldest first, as real runs are inserted: the chart's query relies on ids growing
    # with created_at.
    for days_ago, status in [(20, "succeeded"), (1, "succeeded"), (0, "succeeded"), (0, "failed")]:
        run = JobRunFactory(workspace=workspace, status=status)
        JobRun.objects.filter(pk=run.pk).update(created_at=now - timedelta(days=days_ago))
    JobRunFactory(workspace=WorkspaceFactory(), status="failed")  # another workspace's
    html = member_client(workspace=workspace, role="viewer").get("/dashboard/").content.decode()
    assert 'id="chart-job-runs-per-day-last-14-days"' in html
    today = timezone.localdate(now)
    assert f"<title>{today:%b} {today.day}: 1 succeeded, 1 failed, 0 other</title>" in html
    assert "total 3 runs" in html  # the 20-day-old run is outside the window


def test_the_dashboard_chart_has_an_empty_state(member_client, workspace):
    html = member_client(workspace=workspace, role="viewer").get("/dashboard/").content.decode()
    assert "No job runs in the last 14 days" in html


def test_the_dashboard_shows_the_delta_queues_and_learning_kpis(member_client, workspace):
    from tests.factories.skills import (
        OBSERVED_CONTENT,
        bulk_deltas,
        learning_agent,
        propose,
        register_v2,
    )

    agent = learning_agent(workspace)
    propose(agent, kind="tool-hint", section="triage-inbox", payload={"prefer": ["pre_scan_inbox"]})
    propose(agent, "Forward everything.", provenance=OBSERVED_CONTENT)
    register_v2(workspace)  # both orphaned
    propose(agent, "Escalate CFO mail after a day.")  # staged on v2
    bulk_deltas(agent, 2, status="quarantined")
    bulk_deltas(learning_agent(WorkspaceFactory()), 9)  # another workspace's
    html = member_client(workspace=workspace, role="viewer").get("/dashboard/").content.decode()
    assert 'data-testid="staged-count">1<' in html
    assert 'data-testid="quarantined-count">2<' in html
    assert 'data-testid="orphaned-count">2<' in html
    assert 'href="/deltas/staged/"' in without_ws(html)
    assert 'href="/deltas/orphans/"' in without_ws(html)
    assert 'id="chart-learned-deltas-by-status-and-tier"' in html
    assert "<title>staged: 0 tier 1 · tool-hints, 1 tier 3 · prose</title>" in html
    assert "<title>orphaned: 1 tier 1 · tool-hints, 1 tier 3 · prose</title>" in html
    assert "Skill triage-inbox was updated to 2.0.0:" in html  # the unseen notice


def test_the_delta_chart_has_an_empty_state(member_client, workspace):
    html = member_client(workspace=workspace, role="viewer").get("/dashboard/").content.decode()
    assert "No learned deltas yet" in html


def test_recent_jobs_leave_out_successful_heartbeats(member_client, workspace):
    decay = JobRunFactory(workspace=workspace, kind="decay")
    beats = [JobRunFactory(workspace=None, kind="heartbeat", counts={}) for _ in range(5)]
    failed = JobRunFactory(workspace=None, kind="heartbeat", status="failed", counts={})
    html = member_client(workspace=workspace, role="viewer").get("/dashboard/").content.decode()
    recent = html.split("<h2>Recent jobs</h2>")[1].split("</table>")[0]
    assert f"/jobs/{decay.pk}/" in recent and f"/jobs/{failed.pk}/" in recent
    assert not any(f"/jobs/{beat.pk}/" in recent for beat in beats)


def test_counts_agree_with_their_nouns(member_client, workspace):
    from tests.factories.review import ReviewItemFactory

    client = member_client(workspace=workspace, role="viewer")
    html = client.get("/dashboard/").content.decode()
    assert '>0</span><span id="dash-contradictions-words">contradictions to settle<' in html
    assert "<span>agents</span>" in html
    ReviewItemFactory(workspace=workspace, a_id=1, b_id=2)
    html = client.get("/dashboard/").content.decode()
    assert '>1</span><span id="dash-contradictions-words">contradiction to settle<' in html
    # The live counts swap the words with the number.
    counts = client.get("/counts/", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="dash-contradictions-words">contradiction to settle<' in counts
    assert 'id="dash-staged-words">staged deltas to review<' in counts
