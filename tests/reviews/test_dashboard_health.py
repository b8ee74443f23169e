"""The dashboard answers "what needs me, and is memory healthy?" in a bounded number of
queries, with the demo workspace's real queues and with 10,000 rows per table."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from memory.models import AuditEvent, Knowledge, Lesson, Workspace
from tests.factories.lessons import BLOG, LessonFactory, digest
from tests.factories.review import ReviewItemFactory

pytestmark = pytest.mark.django_db


def test_the_demo_workspace_shows_its_queues_and_trends(member_client):
    call_command("cairn_demo")
    demo = Workspace.objects.get(name="demo")
    html = member_client(workspace=demo, role="viewer").get("/dashboard/").content.decode()
    assert 'data-testid="staged-count">2</span>' in html
    assert 'data-testid="quarantined-count">1</span>' in html
    assert 'data-testid="orphaned-count">3</span>' in html
    assert 'data-testid="claimed-count">1</span>' in html
    assert 'id="chart-lessons-learned-and-retired-per-day-last-30-days"' in html
    learned = AuditEvent.objects.filter(
        workspace=demo, action__in=["lesson.learn", "lesson.create"]
    ).count()
    retired = AuditEvent.objects.filter(workspace=demo, action="lesson.retire").count()
    # Three learned by the loop and one claimed by the model; the compose lesson retired
    # by its contradictions.
    assert (learned, retired) == (4, 1)
    assert "learned: 4; retired: 1</desc>" in html  # the chart's description
    assert 'id="chart-confidence-of-active-lessons"' in html
    assert 'id="chart-strength-of-active-knowledge"' in html
    # What the coding agent remembered, a reminder, a sensitive item and an error item,
    # plus the maintenance demo: a person's item and the agent's that contradicts it, two
    # PostgreSQL items (the older superseded by reconcile but not archived), and the
    # consolidated session's summary and extracted preference.
    active = Knowledge.objects.filter(workspace=demo, status="active").count()
    assert active == 15
    current = Knowledge.objects.filter(
        workspace=demo, status="active", superseded_by__isnull=True
    ).count()
    assert current == 14 and f"items: {current}</desc>" in html  # the chart: current items


def test_open_contradictions_need_attention(member_client, workspace):
    a, b = LessonFactory(workspace=workspace), LessonFactory(workspace=workspace, sealed=True)
    ReviewItemFactory(workspace=workspace, a_id=a.pk, b_id=b.pk)
    html = member_client(workspace=workspace, role="viewer").get("/dashboard/").content.decode()
    assert 'data-testid="contradictions-count">1</span>' in html
    assert "Settle them" in html


def test_review_latency_reads_the_audit_log(member_client, workspace):
    lesson = LessonFactory(workspace=workspace)
    Lesson.objects.filter(pk=lesson.pk).update(created_at=timezone.now() - timedelta(hours=5))
    client = member_client(workspace=workspace, role="reviewer")
    client.post(f"/lessons/{lesson.pk}/retire/", {"reason": "wrong"})
    html = client.get("/dashboard/").content.decode()
    assert 'data-testid="review-latency">5 h</span>' in html
    assert "1 decision on lessons and deltas, last 30 days" in html


def test_an_empty_workspace_reads_calmly(member_client, workspace):
    html = member_client(workspace=workspace, role="viewer").get("/dashboard/").content.decode()
    assert 'data-testid="review-latency">—</span>' in html
    assert "No lesson was learned or retired in the last 30 days" in html
    assert "No active lessons yet" in html
    assert "no two live lessons say the same thing" in html


def test_the_dashboard_stays_bounded_at_10000_rows(
    member_client, workspace, django_assert_max_num_queries
):
    Lesson.objects.bulk_create(
        [
            Lesson(
                workspace=workspace,
                text=f"Lesson {i % 9000}.",
                normalized_text=f"lesson {i % 9000}",
                operation_key="pytest",
                scope="project",
                # One live lesson per project and text (a database rule): the last
                # thousand say the same as the first, in another project.
                project_digest=digest() if i < 9000 else digest(BLOG),
                confidence=(i % 95) / 100 + 0.05,
                birth_confidence=0.5,
                state="claimed" if i % 7 == 0 else "active",
                source="loop",
            )
            for i in range(10_000)
        ],
        batch_size=2_000,
    )
    Knowledge.objects.bulk_create(
        [
            Knowledge(workspace=workspace, content=f"fact {i}", confidence=i / 10_000)
            for i in range(10_000)
        ],
        batch_size=2_000,
    )
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                workspace=workspace,
                actor="user:ada" if i % 3 == 0 else "system:outcomes",
                action="lesson.retire" if i % 3 == 0 else "lesson.learn",
                target_type="lesson",
                target_id=str(i + 1),
            )
            for i in range(10_000)
        ],
        batch_size=2_000,
    )
    client = member_client(workspace=workspace, role="viewer")
    client.get("/dashboard/")
    # session, user, membership, 3 counts, job chart, memberships, 3 nav counters,
    # skill KPIs (3), orphan notices, lesson health, review latency, lessons per day,
    # lessons learned / retired (one aggregate, the Lessons filter's rule), 2 histograms,
    # situations (3), the first hour's checklist (one aggregate)
    with django_assert_max_num_queries(25):
        response = client.get("/dashboard/")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-testid="duplicate-count">2000</span>' in html  # 1,000 texts said twice
    assert 'data-testid="claimed-count">1429</span>' in html
