"""Audit log screen: newest first, action/actor filters, bounded pages at any size."""

from datetime import UTC

import pytest

from memory.models import AuditEvent
from tests.factories.core import AuditEventFactory
from tests.factories.identity import WorkspaceFactory

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def viewer(member_client, workspace):
    return member_client(workspace=workspace, role="viewer")


def test_it_lists_events_as_a_full_page(viewer, workspace):
    event = AuditEventFactory(
        workspace=workspace,
        actor="user:alice",
        action="token.revoke",
        reason="laptop lost",
        details={"prefix": "abcd1234"},
    )
    response = viewer.get("/audit/")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    assert f'id="audit-{event.pk}"' in html
    assert "laptop lost" in html and "prefix <b>abcd1234</b>" in html
    assert '<option value="token.revoke">' in html  # suggested in the action filter
    assert "HX-Request" in response["Vary"]


def test_it_serves_the_rows_fragment_to_htmx(viewer, workspace):
    event = AuditEventFactory(workspace=workspace)
    html = viewer.get("/audit/", **HX).content.decode()
    assert "<html" not in html and 'name="action"' not in html
    assert html.lstrip().startswith('<div id="rows"')
    assert f'id="audit-{event.pk}"' in html


def test_it_filters_by_action_and_actor_prefix(viewer, workspace):
    issue = AuditEventFactory(workspace=workspace, action="token.issue", actor="user:alice")
    revoke = AuditEventFactory(workspace=workspace, action="token.revoke", actor="user:bob")
    decay = AuditEventFactory(workspace=workspace, action="knowledge.decay", actor="system:decay")
    html = viewer.get("/audit/?action=token.", **HX).content.decode()
    assert f'id="audit-{issue.pk}"' in html and f'id="audit-{revoke.pk}"' in html
    assert f'id="audit-{decay.pk}"' not in html
    html = viewer.get("/audit/?action=token.&actor=user:bob", **HX).content.decode()
    assert f'id="audit-{revoke.pk}"' in html and f'id="audit-{issue.pk}"' not in html
    html = viewer.get("/audit/?actor=system", **HX).content.decode()
    assert f'id="audit-{decay.pk}"' in html and f'id="audit-{issue.pk}"' not in html


def test_it_filters_by_target(viewer, workspace):
    mine = AuditEventFactory(workspace=workspace, target_type="token", target_id="12")
    other = AuditEventFactory(workspace=workspace, target_type="token", target_id="13")
    html = viewer.get("/audit/?target_type=token&target_id=12", **HX).content.decode()
    assert f'id="audit-{mine.pk}"' in html and f'id="audit-{other.pk}"' not in html
    assert "Only events for <code>token:12</code>" in html


def test_empty_states_say_what_to_do(member_client):
    client = member_client(workspace=WorkspaceFactory(), role="viewer")
    AuditEvent.objects.all().delete()  # creating the member is itself audited
    assert "Nothing has been recorded" in client.get("/audit/").content.decode()
    filtered = client.get("/audit/?action=nothing.", **HX).content.decode()
    assert "No audit events match these filters." in filtered


def test_other_workspaces_events_are_invisible(viewer, workspace):
    theirs = AuditEventFactory(workspace=WorkspaceFactory(), action="token.issue", reason="x")
    html = viewer.get("/audit/").content.decode()
    assert f'id="audit-{theirs.pk}"' not in html
    html = viewer.get(f"/audit/?target_id={theirs.target_id}", **HX).content.decode()
    assert f'id="audit-{theirs.pk}"' not in html


@pytest.mark.parametrize("role", ["viewer", "reviewer", "admin"])
def test_every_role_reads_the_audit_log(member_client, workspace, role):
    assert member_client(workspace=workspace, role=role).get("/audit/").status_code == 200


def test_it_stays_bounded_and_fast_at_10000_events(
    viewer, workspace, django_assert_max_num_queries
):
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                workspace=workspace,
                actor=f"user:u{i % 7}",
                action="token.issue" if i % 2 else "agent.create",
                target_type="token",
                target_id=str(i),
            )
            for i in range(10_000)
        ],
        batch_size=2_000,
    )
    viewer.get("/audit/")
    # session, user, membership, page, action suggestions, memberships, nav counters
    # (jobs, delta queues, open contradictions)
    with django_assert_max_num_queries(9):
        response = viewer.get("/audit/")
    assert response.status_code == 200
    page = response.context["page"]
    assert len(page) == 50 and page.next_query
    # A deep page costs the same: follow the cursor 10 pages in.
    query = page.next_query
    for _ in range(10):
        with django_assert_max_num_queries(4):
            page = viewer.get(f"/audit/{query}", **HX).context["page"]
        query = page.next_query
    assert len(page) == 50
    with django_assert_max_num_queries(4):
        filtered = viewer.get("/audit/?actor=user:u3&action=token.", **HX)
    assert all(e.actor == "user:u3" and e.action == "token.issue" for e in filtered.context["page"])
    # The page size is capped however large the request.
    assert len(viewer.get("/audit/?size=100000", **HX).context["page"]) == 200


def test_a_date_range_filters_events_and_dates_say_their_timezone(viewer, workspace):
    from datetime import datetime

    old = AuditEventFactory(workspace=workspace, action="token.issue")
    new = AuditEventFactory(workspace=workspace, action="token.revoke")
    AuditEvent.objects.filter(pk=old.pk).update(created_at=datetime(2026, 3, 1, 12, tzinfo=UTC))
    AuditEvent.objects.filter(pk=new.pk).update(created_at=datetime(2026, 3, 5, 23, tzinfo=UTC))

    def shown(query: str) -> set[int]:
        html = viewer.get(f"/audit/?{query}", **HX).content.decode()
        return {e.pk for e in (old, new) if f'id="audit-{e.pk}"' in html}

    assert shown("") == {old.pk, new.pk}
    assert shown("from=2026-03-02") == {new.pk}
    assert shown("to=2026-03-04") == {old.pk}
    assert shown("from=2026-03-05&to=2026-03-05") == {new.pk}  # "to" includes its whole day
    assert shown("from=not-a-date") == {old.pk, new.pk}  # ignored, never a 500
    page = viewer.get("/audit/?from=2026-03-02").content.decode()
    assert 'name="from" type="date" value="2026-03-02"' in page
    assert "2026-03-05 23:00:00 UTC" in page
