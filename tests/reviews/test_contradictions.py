"""The contradictions queue: both sides of each pair, keep A / B / both, nav counter."""

import pytest

from memory.core.actors import Actor
from memory.lessons.posted_evidence import evidence_record
from memory.maintenance.judge import HeuristicJudge
from memory.maintenance.reconcile import reconcile_workspace
from memory.models import AuditEvent, Knowledge, Lesson, LessonState, ReviewItem
from tests.factories.identity import AgentFactory, WorkspaceFactory
from tests.factories.lessons import KnowledgeFactory, LessonFactory
from tests.factories.maintenance import AGENT_VS_PERSON, PERSON, plant
from tests.factories.review import ReviewItemFactory
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def viewer(member_client, workspace):
    return member_client(workspace=workspace, role="viewer")


@pytest.fixture
def reviewer(member_client, workspace):
    return member_client(workspace=workspace, role="reviewer")


@pytest.fixture
def item(workspace):
    a = LessonFactory(workspace=workspace, text="Use compose v2 for services.")
    b = LessonFactory(workspace=workspace, text="Use compose v1 for services.", sealed=True)
    return ReviewItemFactory(workspace=workspace, a_id=a.pk, b_id=b.pk, details={"cosine": 0.93})


def test_the_queue_shows_both_sides_as_a_full_page(viewer, item):
    response = viewer.get("/contradictions/")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    card = html[html.index(f'id="item-{item.pk}"') :]
    assert "Use compose v2 for services." in card and "Use compose v1 for services." in card
    assert f'href="/lessons/{item.a_id}/"' in without_ws(card)
    assert '<span class="badge sealed">' in card
    assert "cosine <b>0.93</b>" in card and "B is sealed by a person" in card
    assert "Keep A…" not in card  # viewers read only
    assert '<span class="count" id="nav-contradictions"' in html


def test_it_serves_the_rows_fragment_to_htmx(viewer, item):
    html = viewer.get("/contradictions/", **HX).content.decode()
    assert html.lstrip().startswith('<div id="rows">') and "<html" not in html
    assert f'id="item-{item.pk}"' in html


def test_the_empty_queue_says_the_reconcile_job_fills_it(viewer):
    html = viewer.get("/contradictions/").content.decode()
    assert "Nothing to settle." in html and "The reconcile job fills this queue" in html
    assert '<span class="count zero" id="nav-contradictions"' in html


def test_resolved_items_are_under_their_own_tab(viewer, workspace, item):
    ReviewItem.objects.filter(pk=item.pk).update(
        status="resolved", resolution="keep_both", resolved_by="user:ada"
    )
    assert f'id="item-{item.pk}"' not in viewer.get("/contradictions/", **HX).content.decode()
    resolved = viewer.get("/contradictions/?status=resolved", **HX).content.decode()
    assert f'id="item-{item.pk}"' in resolved and "kept both" in resolved
    assert f'id="item-{item.pk}"' in viewer.get("/contradictions/?status=all").content.decode()


def test_keep_a_retires_b_and_updates_the_counter(reviewer, item):
    response = reviewer.post(
        f"/contradictions/{item.pk}/keep_a/", {"reason": "v2 is what CI runs"}, **HX
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(
        f'<article class="card review-item status-resolved" id="item-{item.pk}"'
    )
    assert "Resolved: <strong>kept A, retired B</strong>" in html and "“v2 is what CI runs”" in html
    assert 'hx-swap-oob="true"' in html and 'class="count zero" id="nav-contradictions"' in html
    item.refresh_from_db()
    assert item.status == "resolved"
    retired = Lesson.objects.get(pk=item.b_id)
    assert retired.state == LessonState.RETIRED and retired.retired_by == "person"
    event = AuditEvent.objects.get(action="review.resolve")
    assert event.actor == f"user:{reviewer.user.username}" and event.reason == "v2 is what CI runs"


def test_a_resolution_without_a_reason_is_refused_in_place(reviewer, item):
    response = reviewer.post(f"/contradictions/{item.pk}/keep_b/", {"reason": ""}, **HX)
    assert response.status_code == 422
    assert "Say why" in response.content.decode()
    item.refresh_from_db()
    assert item.status == "open"


def test_without_htmx_it_redirects_to_the_queue(reviewer, item):
    response = reviewer.post(f"/contradictions/{item.pk}/keep_both/", {"reason": "both hold"})
    assert response.status_code == 303
    assert (
        response["Location"]
        == f"/contradictions/?ws={reviewer.user.memberships.get().workspace.name}"
    )
    item.refresh_from_db()
    assert item.resolution == "keep_both"


def test_knowledge_sides_hide_sensitive_content(viewer, workspace):
    secret = KnowledgeFactory(workspace=workspace, content="Sarah's diagnosis", sensitive=True)
    fact = KnowledgeFactory(workspace=workspace, content="The office is in Leeds.")
    ReviewItemFactory(
        workspace=workspace, a_type="knowledge", a_id=secret.pk, b_type="knowledge", b_id=fact.pk
    )
    html = viewer.get("/contradictions/").content.decode()
    assert "The office is in Leeds." in html
    assert "diagnosis" not in html and "(sensitive content hidden)" in html


@pytest.mark.parametrize("resolution", ["keep_a", "keep_b", "keep_both"])
def test_viewers_cannot_resolve(viewer, item, resolution):
    response = viewer.post(f"/contradictions/{item.pk}/{resolution}/", {"reason": "x"}, **HX)
    assert response.status_code == 403
    item.refresh_from_db()
    assert item.status == "open"


def test_other_workspaces_items_are_invisible(reviewer):
    foreign_a = LessonFactory(workspace=(other := WorkspaceFactory()))
    foreign = ReviewItemFactory(
        workspace=other, a_id=foreign_a.pk, b_id=LessonFactory(workspace=other).pk
    )
    assert f'id="item-{foreign.pk}"' not in reviewer.get("/contradictions/").content.decode()
    response = reviewer.post(f"/contradictions/{foreign.pk}/keep_a/", {"reason": "x"}, **HX)
    assert response.status_code == 404
    assert reviewer.post(f"/contradictions/{foreign.pk}/flip/", {"reason": "x"}).status_code == 404
    foreign.refresh_from_db()
    assert foreign.status == "open"


def test_the_queue_stays_bounded_at_10000_items(viewer, workspace, django_assert_max_num_queries):
    lessons = Lesson.objects.bulk_create(
        [
            LessonFactory.build(
                workspace=workspace, text=f"Lesson {i}.", normalized_text=f"lesson {i}"
            )
            for i in range(200)
        ]
    )
    ReviewItem.objects.bulk_create(
        [
            ReviewItem(
                workspace=workspace,
                kind="contradiction",
                a_type="lesson",
                a_id=lessons[i % 200].pk,
                b_type="lesson",
                b_id=lessons[(i + 1 + i // 200) % 200].pk,
                reason=f"pair {i}",
                status="open" if i % 4 else "resolved",
                resolution="" if i % 4 else "keep_both",
                resolved_by="" if i % 4 else "user:ada",
            )
            for i in range(10_000)
        ],
        batch_size=2_000,
    )
    viewer.get("/contradictions/")
    # session, user, membership, page, its lessons, nav counters (3), memberships,
    # both sides' ledger and audit history (one query each for the page)
    with django_assert_max_num_queries(11):
        response = viewer.get("/contradictions/")
    page = response.context["page"]
    assert len(page) == 50 and all(item.a is not None for item in page)
    query = page.next_query
    for _ in range(5):
        # session, user, membership, page, its lessons, its sides' ledger and history
        with django_assert_max_num_queries(7):
            page = viewer.get(f"/contradictions/{query}", **HX).context["page"]
        query = page.next_query
    assert len(page) == 50


# --- filled by the reconcile job; edit into one -----------------------------------------


def _reconciled(workspace):
    items = plant(workspace)
    reconcile_workspace(workspace=workspace, judge=HeuristicJudge())
    return items, ReviewItem.objects.get(workspace=workspace)


def test_a_reconcile_item_shows_each_sides_evidence_and_history(viewer, workspace):
    items, review = _reconciled(workspace)
    evidence_record(
        workspace=workspace,
        target_type="knowledge",
        target_id=items["agent_vs_person"].pk,
        kind="user_confirmed",
        evidence_id="ev-1",
        actor=Actor.for_agent(
            items["agent_vs_person"].agent or AgentFactory(workspace=workspace), channel="harness"
        ),
    )
    html = viewer.get("/contradictions/").content.decode()
    card = html[html.index(f'id="item-{review.pk}"') :]
    assert PERSON in card and AGENT_VS_PERSON in card and "by a person" in card
    assert card.count("<code>reconcile.decide</code>") == 2  # in both sides' history
    assert "judged <b>contradiction</b> by heuristic" in card
    assert "evidence · user_confirmed" in card and "0.50 → 0.65" in card
    assert f'href="/knowledge/{items["person"].pk}/"' in without_ws(card)


def test_edit_into_one_writes_a_new_version_and_archives_the_other(reviewer, workspace):
    items, review = _reconciled(workspace)
    url = f"/contradictions/{review.pk}/edit/"
    response = reviewer.post(url, {"reason": "both half right"}, **HX)
    assert response.status_code == 422 and "Write the one text" in response.content.decode()
    merged = "The nightly backup job writes to bucket cairn-backups-v2"
    response = reviewer.post(url, {"reason": "bucket was renamed", "text": merged}, **HX)
    assert response.status_code == 200 and "edited into one" in response.content.decode()
    review.refresh_from_db()
    assert (review.status, review.resolution) == ("resolved", "edit")
    a, b = (Knowledge.objects.get(pk=review.a_id), Knowledge.objects.get(pk=review.b_id))
    new = Knowledge.objects.get(pk=a.superseded_by_id)
    assert new.content == merged and new.source == "user" and new.superseded_by_id is None
    assert b.status == "archived"
    assert AuditEvent.objects.filter(action="review.resolve", target_id=str(review.pk)).exists()


def test_edit_into_one_rewrites_a_lesson(reviewer, item):
    response = reviewer.post(
        f"/contradictions/{item.pk}/edit/",
        {"reason": "v2 everywhere", "text": "Use compose v2 for every service."},
        **HX,
    )
    assert response.status_code == 200
    a, b = Lesson.objects.get(pk=item.a_id), Lesson.objects.get(pk=item.b_id)
    assert Lesson.objects.get(pk=a.superseded_by_id).text == "Use compose v2 for every service."
    assert b.state == LessonState.RETIRED


def test_keeping_one_of_two_knowledge_items_says_the_other_is_archived(reviewer, workspace):
    from tests.factories.lessons import KnowledgeFactory

    a = KnowledgeFactory(workspace=workspace, content="The staging port is 6543.")
    b = KnowledgeFactory(workspace=workspace, content="The staging port is 5432.")
    knowledge_pair = ReviewItemFactory(
        workspace=workspace, a_type="knowledge", a_id=a.pk, b_type="knowledge", b_id=b.pk
    )
    html = reviewer.post(
        f"/contradictions/{knowledge_pair.pk}/keep_a/", {"reason": "checked the config"}, **HX
    ).content.decode()
    assert "kept A, archived B" in html and "retired" not in html.split("Resolved:")[1][:80]


def test_a_similarity_reads_to_two_places(viewer, workspace):
    a = LessonFactory(workspace=workspace, text="Use compose v2.")
    b = LessonFactory(workspace=workspace, text="Use compose v1.")
    details = {"similarity": 0.954123, "judge": "embedding_only", "pair": [a.pk, b.pk]}
    ReviewItemFactory(workspace=workspace, a_id=a.pk, b_id=b.pk, details=details)
    html = viewer.get("/contradictions/").content.decode()
    assert "similarity <b>0.95</b>" in html and "0.954123" not in html
    assert "judge <b>embedding_only</b>" in html
    assert f"pair <b>{a.pk}, {b.pk}</b>" in html  # a list, not "[1, 2]"
