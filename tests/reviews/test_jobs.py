"""Job runs screen: list with filters, live progress for running jobs, detail."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from memory.models import AuditEvent, JobRun
from tests.factories.core import JobRunFactory
from tests.factories.identity import WorkspaceFactory
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def viewer(member_client, workspace):
    return member_client(workspace=workspace, role="viewer")


def test_it_lists_runs_as_a_full_page(viewer, workspace):
    run = JobRunFactory(workspace=workspace, kind="decay", counts={"decayed": 7})
    response = viewer.get("/jobs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and 'id="rows"' in html
    assert f'id="job-{run.pk}"' in html
    assert "decayed <b>7</b>" in html
    assert 'name="kind"' in html and 'name="status"' in html  # the filters
    assert "HX-Request" in response["Vary"]


def test_it_serves_the_rows_fragment_to_htmx(viewer, workspace):
    run = JobRunFactory(workspace=workspace)
    response = viewer.get("/jobs/", **HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and 'name="kind"' not in html
    assert html.lstrip().startswith('<div id="rows"')
    assert f'id="job-{run.pk}"' in html


def test_a_history_restore_gets_the_whole_page(viewer, workspace):
    response = viewer.get("/jobs/", HTTP_HX_HISTORY_RESTORE_REQUEST="true", **HX)
    assert "<html" in response.content.decode()


def test_it_filters_by_kind_and_status(viewer, workspace):
    decay_ok = JobRunFactory(workspace=workspace, kind="decay")
    decay_failed = JobRunFactory(workspace=workspace, kind="decay", status="failed")
    reconcile = JobRunFactory(workspace=workspace, kind="reconcile")
    html = viewer.get("/jobs/?kind=decay", **HX).content.decode()
    assert f'id="job-{decay_ok.pk}"' in html and f'id="job-{decay_failed.pk}"' in html
    assert f'id="job-{reconcile.pk}"' not in html
    html = viewer.get("/jobs/?kind=decay&status=failed", **HX).content.decode()
    assert f'id="job-{decay_failed.pk}"' in html and f'id="job-{decay_ok.pk}"' not in html
    # An unknown status is ignored rather than an error.
    assert viewer.get("/jobs/?status=exploded").status_code == 200


def test_the_kind_filter_offers_the_spec_kinds_and_seen_ones(viewer, workspace):
    JobRunFactory(workspace=workspace, kind="custom_sweep")
    html = viewer.get("/jobs/").content.decode()
    for kind in ("decay", "reconcile", "consolidate", "custom_sweep"):
        assert f'<option value="{kind}"' in html


def test_empty_states_say_what_to_do(viewer, workspace):
    from cairn.health import check_workers

    html = viewer.get("/jobs/").content.decode()
    assert "No job has run yet" in html
    # The page says what the workers answer, never "start it" to a running stack.
    if check_workers()[0]:
        assert "answered just now" in html and "make run" not in html
    else:
        assert "no worker answered" in html and "make run" in html
    JobRunFactory(workspace=workspace, kind="decay")
    filtered = viewer.get("/jobs/?kind=prune", **HX).content.decode()
    assert "No job runs match these filters." in filtered and "Clear the filters" in filtered


def test_running_and_queued_rows_poll_and_finished_rows_do_not(viewer, workspace):
    running = JobRunFactory(
        workspace=workspace,
        status="running",
        started_at=timezone.now(),
        progress_done=3,
        progress_total=10,
    )
    queued = JobRunFactory(workspace=workspace, status="queued")
    done = JobRunFactory(workspace=workspace, status="succeeded")
    html = viewer.get("/jobs/", **HX).content.decode()

    def row(run):
        start = html.index(f'<tr id="job-{run.pk}"')
        return html[start : html.index(">", start)]

    assert f'hx-get="/jobs/{running.pk}/?ws={workspace.name}" hx-trigger="every 2s"' in row(running)
    assert 'hx-trigger="every 2s"' in row(queued)
    assert "hx-trigger" not in row(done)
    assert '<progress max="100" value="30"' in html
    assert "3 / 10" in html


def test_the_poller_gets_the_row_and_it_stops_when_the_job_ends(viewer, workspace):
    run = JobRunFactory(workspace=workspace, status="running", started_at=timezone.now())
    html = viewer.get(f"/jobs/{run.pk}/", HTTP_HX_TARGET=f"job-{run.pk}", **HX).content.decode()
    assert html.lstrip().startswith(f'<tr id="job-{run.pk}"') and "every 2s" in html
    JobRun.objects.filter(pk=run.pk).update(
        status="failed",
        finished_at=timezone.now(),
        error="Traceback ...\nValueError: embedder answered 500",
    )
    html = viewer.get(f"/jobs/{run.pk}/", HTTP_HX_TARGET=f"job-{run.pk}", **HX).content.decode()
    assert "hx-trigger" not in html
    assert "ValueError: embedder answered 500" in html  # the error's last line, in the row


def test_the_detail_page_shows_the_whole_run(viewer, workspace):
    run = JobRunFactory(
        workspace=workspace,
        status="failed",
        params={"days": 30},
        error="Traceback (most recent call last):\nValueError: boom",
    )
    response = viewer.get(f"/jobs/{run.pk}/")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    section = html[html.index('<section class="card" id="job-detail"') :]
    assert "hx-trigger" not in section[: section.index(">")]
    assert "Traceback (most recent call last):" in html and "&#x27;days&#x27;: 30" in html
    # Its own poller asks for the detail card, not the row.
    running = JobRunFactory(workspace=workspace, status="running", started_at=timezone.now())
    card = viewer.get(f"/jobs/{running.pk}/", HTTP_HX_TARGET="job-detail", **HX)
    assert card.content.decode().lstrip().startswith('<section class="card" id="job-detail"')
    assert "HX-Target" in card["Vary"] and "HX-Request" in card["Vary"]


def test_system_runs_are_shown_to_every_workspace(viewer, workspace):
    # Not a heartbeat: a succeeded heartbeat is hidden from the list by default.
    system = JobRunFactory(workspace=None, kind="decay")
    html = viewer.get("/jobs/").content.decode()
    assert f'id="job-{system.pk}"' in html and "badge system" in html
    assert viewer.get(f"/jobs/{system.pk}/").status_code == 200


def test_other_workspaces_runs_are_invisible_and_404(viewer, workspace):
    theirs = JobRunFactory(workspace=WorkspaceFactory(), kind="export")
    html = viewer.get("/jobs/").content.decode()
    assert f'id="job-{theirs.pk}"' not in html
    assert viewer.get(f"/jobs/{theirs.pk}/").status_code == 404
    assert viewer.get(f"/jobs/{theirs.pk}/", **HX).status_code == 404
    assert viewer.get("/jobs/999999/").status_code == 404


@pytest.mark.parametrize("role", ["viewer", "reviewer", "admin"])
def test_every_role_sees_job_runs(member_client, workspace, role):
    assert member_client(workspace=workspace, role=role).get("/jobs/").status_code == 200


def test_the_nav_counts_active_runs(viewer, workspace):
    JobRunFactory(workspace=workspace, status="running")
    JobRunFactory(workspace=workspace, status="queued")
    JobRunFactory(workspace=workspace, status="succeeded")
    JobRunFactory(workspace=WorkspaceFactory(), status="running")  # not ours
    html = viewer.get("/dashboard/").content.decode()
    assert '<span class="count" title="queued or running">2</span>' in html


def test_pages_walk_every_run_once(viewer, workspace):
    runs = [JobRunFactory(workspace=workspace) for _ in range(7)]
    # Same created_at for all: the id tie-breaker still keeps each on one page.
    JobRun.objects.filter(workspace=workspace).update(created_at=timezone.now())
    seen, query = [], "?size=3"
    for _ in range(5):
        page = viewer.get(f"/jobs/{query}", **HX).context["page"]
        seen += [run.pk for run in page]
        if not page.next_query:
            break
        query = page.next_query
    assert sorted(seen) == sorted(run.pk for run in runs) and len(seen) == 7


def test_the_list_query_count_is_pinned(viewer, workspace, django_assert_max_num_queries):
    JobRun.objects.bulk_create(
        [JobRun(workspace=workspace, kind="decay", status="succeeded") for _ in range(500)]
    )
    viewer.get("/jobs/")
    # session, user, membership, page, kind suggestions, memberships, nav counters
    # (jobs, delta queues, open contradictions), the beat schedule's last runs
    with django_assert_max_num_queries(10):
        assert viewer.get("/jobs/").status_code == 200
    # the fragment: session, user, membership, page, the schedule's last runs
    with django_assert_max_num_queries(5):
        assert viewer.get("/jobs/?kind=decay", **HX).status_code == 200


def test_the_nav_counter_looks_only_at_recent_runs(viewer, workspace, settings):
    settings.CAIRN_UI_ACTIVE_JOB_WINDOW = 3
    stuck = JobRunFactory(workspace=workspace, status="running")
    for _ in range(3):
        JobRunFactory(workspace=workspace, status="succeeded")
    html = viewer.get("/jobs/").content.decode()
    assert 'title="queued or running"' not in html  # outside the window: no badge
    # The list's status filter still finds the stuck run.
    assert f'id="job-{stuck.pk}"' in viewer.get("/jobs/?status=running", **HX).content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_empty_state_of_a_running_stack_does_not_ask_to_start_it(
    celery_worker_process, member_client
):
    workspace = WorkspaceFactory()
    viewer = member_client(workspace=workspace, role="viewer")
    JobRun.objects.all().delete()
    html = viewer.get("/jobs/").content.decode()
    assert "worker answered just now" in html or "workers answered just now" in html
    assert "make run" not in html and "no worker answered" not in html


# --- Run now (admins) -------------------------------------------------------------------


def test_run_now_is_for_admins_only(viewer, member_client, workspace):
    assert 'data-testid="run-reconcile"' not in viewer.get("/jobs/").content.decode()
    assert viewer.post("/jobs/run/reconcile/").status_code == 403
    reviewer = member_client(workspace=workspace, role="reviewer")
    assert reviewer.post("/jobs/run/reconcile/").status_code == 403
    assert not JobRun.objects.exists()


def test_run_now_queues_the_job_and_shows_it(member_client, workspace):
    admin = member_client(workspace=workspace, role="admin")
    html = admin.get("/jobs/").content.decode()
    assert 'data-testid="run-reconcile"' in html and 'data-testid="run-consolidate"' in html
    response = admin.post("/jobs/run/reconcile/")
    assert response.status_code == 303 and without_ws(response["Location"]) == "/jobs/"
    run = JobRun.objects.get()
    assert (run.kind, run.status, run.workspace) == ("reconcile", "queued", workspace)
    assert AuditEvent.objects.filter(action="job.run_now", target_id=str(run.pk)).exists()
    # As htmx: the rows come back with the run (already queued: not queued twice).
    response = admin.post("/jobs/run/reconcile/", **HX)
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<div id="rows"')
    assert f'id="job-{run.pk}"' in html and "already queued" in html
    assert JobRun.objects.count() == 1
    assert admin.post("/jobs/run/format_disk/").status_code == 404
    assert admin.get("/jobs/run/reconcile/").status_code == 405


def test_run_now_needs_the_csrf_token(member_client, workspace):
    admin = member_client(workspace=workspace, role="admin")
    admin.handler.enforce_csrf_checks = True
    assert admin.post("/jobs/run/decay/").status_code == 403
    assert not JobRun.objects.exists()


def test_run_now_describes_each_job_and_prune_needs_a_confirmation(member_client, workspace):
    from memory.models import JobRun

    admin = member_client(workspace=workspace, role="admin")
    html = admin.get("/jobs/").content.decode()
    assert 'data-testid="describe-prune"' in html and "for good" in html
    assert 'data-testid="describe-decay"' in html and "Pinned items are exempt" in html
    assert 'name="confirm" value="yes" required' in html
    response = admin.post("/jobs/run/prune/", follow=True)
    assert "deletes data for good" in response.content.decode()
    assert not JobRun.objects.filter(kind="prune", workspace=workspace).exists()
    admin.post("/jobs/run/prune/", {"confirm": "yes"})
    assert JobRun.objects.filter(kind="prune", workspace=workspace).count() == 1
    # Other jobs run on one click, as before.
    admin.post("/jobs/run/decay/")
    assert JobRun.objects.filter(kind="decay", workspace=workspace).count() == 1


def test_the_active_filter_shows_the_runs_the_dashboard_counts(viewer, workspace, settings):
    settings.CAIRN_UI_ACTIVE_JOB_WINDOW = 5
    stuck = JobRunFactory(workspace=workspace, status="running")  # beyond the window
    JobRun.objects.bulk_create(
        [JobRun(workspace=workspace, kind="decay", status="succeeded") for _ in range(4)]
    )
    queued = JobRunFactory(workspace=workspace, status="queued")
    running = JobRunFactory(workspace=workspace, status="running")
    dashboard = viewer.get("/dashboard/").content.decode()
    assert 'data-testid="active-jobs-count">2<' in dashboard
    assert "/jobs/?status=active" in dashboard
    html = viewer.get("/jobs/?status=active").content.decode()
    assert html.count('<tr id="job-') == 2
    assert f'id="job-{queued.pk}"' in html and f'id="job-{running.pk}"' in html
    assert f'id="job-{stuck.pk}"' not in html
    assert '<option value="active" selected>queued or running</option>' in html
    # The plain status filter still finds the stuck run.
    assert f'id="job-{stuck.pk}"' in viewer.get("/jobs/?status=running").content.decode()


def test_failed_runs_link_to_the_same_days(viewer, workspace):
    now = timezone.now()
    for days_ago in (30, 2, 0):
        run = JobRunFactory(workspace=workspace, status="failed", error="boom")
        JobRun.objects.filter(pk=run.pk).update(created_at=now - timedelta(days=days_ago))
    dashboard = viewer.get("/dashboard/").content.decode()
    assert 'data-testid="failed-runs-count">2<' in dashboard
    since = (timezone.localdate() - timedelta(days=13)).isoformat()
    assert f"/jobs/?status=failed&amp;since={since}" in dashboard
    html = viewer.get(f"/jobs/?status=failed&since={since}").content.decode()
    assert html.count('<tr id="job-') == 2
    assert f'value="{since}"' in html  # the filter shows what it applies
    assert (
        viewer.get("/jobs/?status=failed&since=not-a-day").content.decode().count('<tr id="job-')
        == 3
    )


def test_a_run_now_toast_follows_its_run_to_the_end(member_client, workspace):
    admin = member_client(workspace=workspace, role="admin")
    page = admin.post("/jobs/run/decay/", follow=True).content.decode()
    run = JobRun.objects.get(kind="decay")
    toast = f"/jobs/{run.pk}/toast/"
    assert f'hx-get="{toast}?ws={workspace.name}" hx-trigger="load, every 2s"' in page
    assert admin.get(toast, **HX).status_code == 204  # queued: the toast stays as it is
    JobRun.objects.filter(pk=run.pk).update(status="failed", error="Traceback\nValueError: bad")
    ended = admin.get(toast, **HX)
    html = ended.content.decode()
    assert ended.status_code == 200 and 'class="toast error ended"' in html
    assert f"decay run #{run.pk} failed." in html and "ValueError: bad" in html
    assert f'href="/jobs/{run.pk}/?ws={workspace.name}"' in html and "hx-get" not in html
    JobRun.objects.filter(pk=run.pk).update(status="succeeded", error="")
    assert 'class="toast success ended"' in admin.get(toast, **HX).content.decode()
    # Another workspace's run: the toast goes; an ended session: no change, no login page.
    other = JobRunFactory(workspace=WorkspaceFactory(), status="succeeded")
    gone = admin.get(f"/jobs/{other.pk}/toast/", **HX)
    assert gone.status_code == 200 and gone.content == b""
    assert Client().get(toast, **HX).status_code == 204  # logged out
