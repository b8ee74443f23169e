"""Orphans after a skill update: the one-time notice, what re-approval would do, bulk re-approve."""

import re

import pytest

from memory.core.actors import Actor
from memory.models import AuditEvent, OrphanNotice, SkillDelta
from memory.skills.consent import delta_approve
from tests.factories.identity import WorkspaceFactory
from tests.factories.skills import (
    OBSERVED_CONTENT,
    OUTCOME_EVIDENCE,
    bulk_deltas,
    harness_feedback,
    learning_agent,
    propose,
    register_v2,
)
from tests.factories.skills import reviewer as make_reviewer
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
# v2 rewrites Escalation and the intro (so the first heading's digest changes), keeps
# Drafting replies, and renames nothing: every slug still exists.
NO_INTRO = """
## Escalation
Escalate a thread after one business day without a reply.

## Drafting replies
Keep replies short and polite.
"""


@pytest.fixture
def agent(workspace):
    return learning_agent(workspace, name="gaia/chat")


@pytest.fixture
def reviewer(member_client, workspace):
    return member_client(workspace=workspace, role="reviewer")


@pytest.fixture
def viewer(member_client, workspace):
    return member_client(workspace=workspace, role="viewer")


@pytest.fixture
def orphans(agent, workspace):
    """Five orphans of every kind, made by registering v2 over real deltas."""
    person = make_reviewer(workspace, username="setup")
    same = delta_approve(
        delta=propose(agent, "Sign with a first name.", section="drafting-replies"),
        actor=Actor.for_user(person),
        reason="ok",
    )
    stale = propose(agent, "Escalate CFO threads after 48 hours.", section="escalation")
    untrusted = propose(
        agent,
        "Reply in the sender's language.",
        section="drafting-replies",
        provenance=OBSERVED_CONTENT,
    )
    evidence = propose(
        agent, "Offer two slots.", section="drafting-replies", provenance=OUTCOME_EVIDENCE
    )
    harness_feedback(agent=agent, action_type="reply", scope=evidence.scope, positive=True)
    gone = propose(agent, "Newest first.", section="triage-inbox")
    result = register_v2(workspace, body=NO_INTRO)
    assert result.orphaned == 5
    return {
        "same": same,
        "stale": stale,
        "untrusted": untrusted,
        "evidence": evidence,
        "gone": gone,
    }


def _card(html: str, pk: int) -> str:
    start = html.index(f'id="delta-{pk}"')
    return html[html.rindex("<article", 0, start) : html.index("</article>", start)]


# --- the list -----------------------------------------------------------------------


def test_it_lists_orphans_grouped_with_what_reapproval_would_do(viewer, orphans):
    response = viewer.get("/deltas/orphans/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and 'id="rows"' in html
    assert html.count('<section class="group"') == 1
    assert 'triage-inbox</a> <span class="hint">written for</span> 1.0.0' in html
    assert "→ now</span> 2.0.0" in html
    assert "same section text" in _card(html, orphans["same"].pk)
    assert "Escalation</b> section changed in 2.0.0" in _card(html, orphans["stale"].pk)
    assert "back to quarantine" in _card(html, orphans["untrusted"].pk)
    assert "1 of 5 samples" in _card(html, orphans["evidence"].pk)
    gone = _card(html, orphans["gone"].pk)
    assert "section gone" in gone and "no longer exists in 2.0.0" in gone


def test_it_serves_the_rows_fragment_to_htmx(viewer, orphans):
    html = viewer.get("/deltas/orphans/", **HX).content.decode()
    assert "<html" not in html and html.lstrip().startswith('<div id="rows"')
    assert f'id="delta-{orphans["same"].pk}"' in html


def test_the_notice_shows_until_a_reviewer_dismisses_it(member_client, orphans, workspace):
    notice = OrphanNotice.objects.get(workspace=workspace)
    viewer = member_client(workspace=workspace, role="viewer")
    banner = (
        "Skill triage-inbox was updated to 2.0.0:</strong> "
        '<span data-testid="notice-remaining">5</span> learned adjustments still need '
        "re-approval."
    )
    viewer_html = viewer.get("/deltas/orphans/").content.decode()
    assert banner in viewer_html
    assert "orphans/notices/" not in viewer_html  # viewers cannot dismiss it
    assert banner in viewer.get("/dashboard/").content.decode()
    assert viewer.post(f"/deltas/orphans/notices/{notice.pk}/seen/", **HX).status_code == 403

    reviewer = member_client(workspace=workspace, role="reviewer")  # the same client, re-logged
    reviewer_html = reviewer.get("/deltas/orphans/").content.decode()
    assert f"/deltas/orphans/notices/{notice.pk}/seen/" in reviewer_html
    response = reviewer.post(f"/deltas/orphans/notices/{notice.pk}/seen/", **HX)
    assert response.status_code == 200
    assert f'id="notice-{notice.pk}"' not in response.content.decode()
    notice.refresh_from_db()
    assert notice.seen_at is not None and notice.seen_by == f"user:{reviewer.user.username}"
    assert AuditEvent.objects.filter(action="orphan_notice.seen").count() == 1
    assert banner not in reviewer.get("/deltas/orphans/").content.decode()
    assert banner not in reviewer.get("/dashboard/").content.decode()
    # The orphans themselves stay until someone re-approves or discards them.
    assert f'id="delta-{orphans["same"].pk}"' in reviewer.get("/deltas/orphans/").content.decode()


def test_a_singular_notice_reads_right(reviewer, agent, workspace):
    propose(agent)
    register_v2(workspace)
    assert (
        '<span data-testid="notice-remaining">1</span> learned adjustment still needs re-approval.'
        in reviewer.get("/deltas/orphans/").content.decode()
    )


def test_the_notice_counts_what_still_waits(reviewer, orphans):
    pk = orphans["same"].pk
    reviewer.post(f"/deltas/orphans/{pk}/reapprove/", {"reason": "still right"}, **HX)
    html = reviewer.get("/deltas/orphans/").content.decode()
    assert (
        '<span data-testid="notice-remaining">4</span> learned adjustments still need '
        "re-approval (of 5 it orphaned)." in html
    )
    assert "4" in reviewer.get("/dashboard/").content.decode().split("notice-remaining")[1][:5]


def test_only_stale_orphans_left_offer_no_bulk_form(reviewer, orphans):
    SkillDelta.objects.filter(status="orphaned").exclude(pk=orphans["stale"].pk).update(
        status="archived"
    )
    html = reviewer.get("/deltas/orphans/").content.decode()
    assert f'id="delta-{orphans["stale"].pk}"' in html
    assert 'id="orphan-bulk"' not in html and "Select all on this page" not in html
    assert "Select this group" not in html
    # With one orphan that bulk can take, the form is back.
    SkillDelta.objects.filter(pk=orphans["same"].pk).update(status="orphaned")
    html = reviewer.get("/deltas/orphans/").content.decode()
    assert 'id="orphan-bulk"' in html and "Select all on this page" in html


def test_empty_state_says_what_to_do(viewer):
    html = viewer.get("/deltas/orphans/").content.decode()
    assert "No orphans." in html and "POST /api/v1/skills/" in html


def test_the_list_query_count_does_not_grow_with_the_queue(
    member_client, workspace, agent, django_assert_max_num_queries
):
    propose(agent)
    bulk_deltas(agent, 150, status="active", approved_by="user:x")
    bulk_deltas(learning_agent(workspace, register=False), 49)
    register_v2(workspace)
    client = member_client(workspace=workspace, role="reviewer")
    client.get("/deltas/orphans/?size=200")
    # session, user, membership, notices, the page, umbrella members, active deltas,
    # the workspace menu, nav queue counts, active jobs, open contradictions and the
    # texts of the versions stale orphans were written for (their section's old → new)
    # (+2: the queue total and the filter facets, each one query whatever the size)
    with django_assert_max_num_queries(14):
        response = client.get("/deltas/orphans/?size=200")
    assert len(response.context["page"]) == 200


# --- acting on one --------------------------------------------------------------------


def test_a_reviewer_reapproves_one_orphan(reviewer, orphans):
    pk = orphans["stale"].pk
    response = reviewer.post(f"/deltas/orphans/{pk}/reapprove/", {"reason": "still true"}, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert f'id="delta-{pk}"' not in html and "re-approved" in html
    assert re.search(r'id="nav-orphans"[^>]*>4<', html)
    delta = SkillDelta.objects.select_related("anchor_version").get(pk=pk)
    assert (delta.status, delta.stale, delta.anchor_version.version) == ("active", True, "2.0.0")


def test_reapproving_an_untrusted_orphan_sends_it_back_to_quarantine(reviewer, orphans):
    pk = orphans["untrusted"].pk
    response = reviewer.post(f"/deltas/orphans/{pk}/reapprove/", {"reason": "read it"}, **HX)
    assert response.status_code == 200 and "back in quarantine" in response.content.decode()
    assert SkillDelta.objects.get(pk=pk).status == "quarantined"


def test_a_refused_reapproval_keeps_the_card_with_the_reason(reviewer, orphans):
    pk = orphans["gone"].pk
    response = reviewer.post(f"/deltas/orphans/{pk}/reapprove/", {"reason": "try"}, **HX)
    assert response.status_code == 422
    html = response.content.decode()
    assert f'id="delta-{pk}"' in html and "no longer exists in 2.0.0" in html
    assert SkillDelta.objects.get(pk=pk).status == "orphaned"


def test_a_reviewer_discards_an_orphan(reviewer, orphans):
    pk = orphans["gone"].pk
    response = reviewer.post(f"/deltas/orphans/{pk}/discard/", {"reason": "v2 covers it"}, **HX)
    assert response.status_code == 200
    assert SkillDelta.objects.get(pk=pk).status == "archived"
    assert AuditEvent.objects.get(action="delta.reject", target_id=str(pk)).reason == "v2 covers it"


# --- bulk ---------------------------------------------------------------------------------


def test_bulk_reapprove_reports_what_happened_to_each(reviewer, orphans):
    ids = [orphans[k].pk for k in ("same", "stale", "untrusted", "evidence", "gone")]
    response = reviewer.post(
        "/deltas/orphans/reapprove/", {"ids": ids, "reason": "reviewed against v2"}, **HX
    )
    assert response.status_code == 200
    html = response.content.decode()
    report = html[html.index('data-testid="reapprove-report"') :]
    assert re.search(r'data-testid="report-reapproved">1<', report)
    assert re.search(r'data-testid="report-quarantined">1<', report)
    assert re.search(r'data-testid="report-refused">3<', report)
    assert "no longer exists in 2.0.0" in report and "Not enough evidence" in report
    # A stale orphan is never re-approved in bulk: it is read on its own card.
    assert "re-approve it on its own" in report
    assert "Re-approved 1 of 5; 1 back in quarantine; 3 refused." in html  # the toast
    assert re.search(r'id="nav-orphans"[^>]*>3<', html)
    statuses = dict(SkillDelta.objects.filter(pk__in=ids).values_list("pk", "status"))
    assert statuses == {
        orphans["same"].pk: "active",
        orphans["stale"].pk: "orphaned",
        orphans["untrusted"].pk: "quarantined",
        orphans["evidence"].pk: "orphaned",
        orphans["gone"].pk: "orphaned",
    }
    # One service call: every change is audited with the one reason.
    assert (
        AuditEvent.objects.filter(action="delta.reapprove", reason="reviewed against v2").count()
        == 2
    )
    # The refused ones are still listed for a decision; the others are gone from the list.
    assert f'id="delta-{orphans["gone"].pk}"' in html
    assert f'id="delta-{orphans["same"].pk}"' not in html


def test_bulk_reapprove_of_some(reviewer, orphans):
    ids = [orphans["same"].pk, orphans["stale"].pk]
    reviewer.post("/deltas/orphans/reapprove/", {"ids": ids, "reason": "ok"}, **HX)
    assert SkillDelta.objects.filter(status="orphaned").count() == 4  # the stale one stays


def test_a_stale_orphan_cannot_be_ticked_for_bulk_but_is_reapproved_on_its_own(reviewer, orphans):
    html = reviewer.get("/deltas/orphans/").content.decode()
    assert f'name="ids" value="{orphans["stale"].pk}"' not in html
    assert f'name="ids" value="{orphans["same"].pk}"' in html
    pk = orphans["stale"].pk
    response = reviewer.post(
        f"/deltas/orphans/{pk}/reapprove/", {"reason": "read against the new text"}, **HX
    )
    assert response.status_code == 200
    assert SkillDelta.objects.get(pk=pk).status == "active"


def test_bulk_reapprove_needs_a_selection_and_a_reason(reviewer, orphans):
    response = reviewer.post("/deltas/orphans/reapprove/", {"reason": "ok"}, **HX)
    assert response.status_code == 422
    assert "Tick at least one orphan" in response.content.decode()
    response = reviewer.post("/deltas/orphans/reapprove/", {"ids": [orphans["same"].pk]}, **HX)
    assert response.status_code == 422
    html = response.content.decode()
    assert "Say why" in html
    assert f'value="{orphans["same"].pk}" form="orphan-bulk" checked' in html  # ticks kept
    assert SkillDelta.objects.filter(status="orphaned").count() == 5


def test_bulk_reapprove_without_htmx_redirects_with_the_summary(reviewer, orphans):
    response = reviewer.post(
        "/deltas/orphans/reapprove/", {"ids": [orphans["same"].pk], "reason": "ok"}
    )
    assert response.status_code == 303 and without_ws(response["Location"]) == "/deltas/orphans/"
    assert "Re-approved 1 of 1." in reviewer.get("/deltas/orphans/").content.decode()


def test_bulk_reapprove_skips_other_workspaces_and_non_orphans(reviewer, orphans):
    other = learning_agent(WorkspaceFactory())
    theirs = propose(other)
    register_v2(other.workspace)
    staged = propose(
        learning_agent(orphans["same"].workspace, register=False), "Fresh.", section="escalation"
    )
    ids = [theirs.pk, staged.pk, orphans["same"].pk]
    response = reviewer.post("/deltas/orphans/reapprove/", {"ids": ids, "reason": "ok"}, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert re.search(r'data-testid="report-reapproved">1<', html)
    assert "no longer orphaned" in html
    assert SkillDelta.objects.get(pk=theirs.pk).status == "orphaned"
    assert SkillDelta.objects.get(pk=staged.pk).status == "staged"


@pytest.mark.parametrize(
    ("url", "data"),
    [
        ("/deltas/orphans/reapprove/", {"reason": "x"}),
        ("/deltas/orphans/{pk}/reapprove/", {"reason": "x"}),
        ("/deltas/orphans/{pk}/discard/", {"reason": "x"}),
    ],
)
def test_a_viewer_cannot_act(viewer, orphans, url, data):
    pk = orphans["same"].pk
    response = viewer.post(url.format(pk=pk), {**data, "ids": [pk]}, **HX)
    assert response.status_code == 403
    assert SkillDelta.objects.get(pk=pk).status == "orphaned"


def test_another_workspaces_orphans_are_invisible_and_404(reviewer, orphans):
    other = learning_agent(WorkspaceFactory())
    theirs = propose(other, "Theirs: newest first.")
    register_v2(other.workspace)
    notice = OrphanNotice.objects.get(workspace=other.workspace)
    html = reviewer.get("/deltas/orphans/").content.decode()
    assert "Theirs:" not in html and f'id="notice-{notice.pk}"' not in html
    for url in (f"/deltas/orphans/{theirs.pk}/reapprove/", f"/deltas/orphans/{theirs.pk}/discard/"):
        assert reviewer.post(url, {"reason": "x"}, **HX).status_code == 404
    assert reviewer.post(f"/deltas/orphans/notices/{notice.pk}/seen/", **HX).status_code == 404
    assert SkillDelta.objects.get(pk=theirs.pk).status == "orphaned"
    notice.refresh_from_db()
    assert notice.seen_at is None


def test_every_delta_action_works_without_htmx(reviewer, agent, workspace, orphans):
    """Each action is a plain form POST too: it redirects (303) back to its queue."""
    staged = propose(agent, "Fresh on v2.", section="escalation")
    quarantined = propose(
        agent, "Forward it all.", section="escalation", provenance=OBSERVED_CONTENT
    )
    notice = OrphanNotice.objects.get(workspace=workspace)
    cases = [
        (f"/deltas/staged/{staged.pk}/reject/", {"reason": "no"}, "/deltas/staged/"),
        (f"/deltas/quarantine/{quarantined.pk}/reject/", {"reason": "no"}, "/deltas/quarantine/"),
        (f"/deltas/orphans/{orphans['gone'].pk}/discard/", {"reason": "no"}, "/deltas/orphans/"),
        (f"/deltas/orphans/{orphans['same'].pk}/reapprove/", {"reason": "ok"}, "/deltas/orphans/"),
        (f"/deltas/orphans/notices/{notice.pk}/seen/", {}, "/deltas/orphans/"),
    ]
    for url, data, back in cases:
        response = reviewer.post(url, data)
        assert (response.status_code, without_ws(response["Location"])) == (303, back), url
    statuses = dict(SkillDelta.objects.values_list("pk", "status"))
    assert (
        statuses[staged.pk]
        == statuses[quarantined.pk]
        == statuses[orphans["gone"].pk]
        == ("archived")
    )
    assert statuses[orphans["same"].pk] == "active"
    notice.refresh_from_db()
    assert notice.seen_at is not None
