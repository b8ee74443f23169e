"""The knowledge browser: recall-backed search that is not a use, filters, one item's page,
and a person's edit, archive, restore and delete through the knowledge services."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.knowledge.services import knowledge_update
from memory.lessons.decay import decay_run
from memory.maintenance.judge import HeuristicJudge
from memory.maintenance.reconcile import reconcile_workspace
from memory.models import AuditEvent, ConfidenceChange, Knowledge
from tests.factories.identity import WorkspaceFactory, person_actor
from tests.factories.knowledge import KnowledgeFactory
from tests.factories.maintenance import plant
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
ACTIONS = ("edit", "archive", "restore", "delete")


@pytest.fixture
def viewer(member_client, workspace):
    return member_client(workspace=workspace, role="viewer")


@pytest.fixture
def reviewer(member_client, workspace):
    return member_client(workspace=workspace, role="reviewer")


@pytest.fixture
def host(workspace):
    return KnowledgeFactory(
        workspace=workspace, content="The staging database host is db3.internal."
    )


def row(html: str, pk: int) -> str:
    start = html.index(f'id="knowledge-{pk}"')
    return html[start : html.index("</tr>", start)]


# --- browsing and searching -----------------------------------------------------------------


def test_it_lists_knowledge_as_a_full_page(viewer, host):
    response = viewer.get("/knowledge/")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    assert 'name="q"' in html and 'name="sensitive"' in html and 'name="category"' in html
    assert "The staging database host is db3.internal." in row(html, host.pk)
    assert "HX-Request" in response["Vary"]


def test_it_serves_the_rows_fragment_to_htmx(viewer, host):
    html = viewer.get("/knowledge/", **HX).content.decode()
    assert html.lstrip().startswith('<div id="rows"') and "<html" not in html
    assert f'id="knowledge-{host.pk}"' in html


def test_search_shows_vector_rank_text_rank_and_score(viewer, workspace, host):
    KnowledgeFactory(workspace=workspace, content="Sarah prefers tea over coffee.")
    html = viewer.get("/knowledge/?q=staging+database+host", **HX).content.decode()
    assert "vector and full-text ranks fused" in html
    first = row(html, host.pk)
    assert '<td class="rank">1</td>' in first
    cells = first.split('<td class="num-cell">')[1:]
    assert cells[0].startswith("1<") and cells[1].startswith("1<")  # first in both lists
    assert "<b>1.025</b>" in cells[2]  # relevance 1.0 + 0.05 x strength 0.5


def test_searching_is_not_a_use_and_moves_nothing(viewer, host):
    viewer.get("/knowledge/?q=staging+database")
    host.refresh_from_db()
    assert host.use_count == 0 and host.last_used_at is None and host.confidence == 0.5
    assert not ConfidenceChange.objects.exists()


def test_sensitive_items_are_hidden_unless_asked_for(viewer, workspace):
    secret = KnowledgeFactory(
        workspace=workspace, content="Sarah's blood type is O negative.", sensitive=True
    )
    assert f'id="knowledge-{secret.pk}"' not in viewer.get("/knowledge/", **HX).content.decode()
    assert (
        f'id="knowledge-{secret.pk}"'
        not in viewer.get("/knowledge/?q=blood+type", **HX).content.decode()
    )
    shown = viewer.get("/knowledge/?sensitive=1", **HX).content.decode()
    assert '<span class="badge sensitive">sensitive</span>' in row(shown, secret.pk)
    found = viewer.get("/knowledge/?q=blood+type&sensitive=1", **HX).content.decode()
    assert f'id="knowledge-{secret.pk}"' in found


def test_it_filters_by_category_context_entity_and_status(viewer, workspace, host):
    pref = KnowledgeFactory(
        workspace=workspace,
        content="Sarah likes short replies.",
        category="preference",
        entity="person:sarah",
        context="work",
    )
    gone = KnowledgeFactory(workspace=workspace, content="Old VPN host.", status="archived")

    def shown(query):
        html = viewer.get(f"/knowledge/?{query}", **HX).content.decode()
        return {k.pk for k in (host, pref, gone) if f'id="knowledge-{k.pk}"' in html}

    assert shown("") == {host.pk, pref.pk}
    assert shown("category=preference") == {pref.pk}
    assert shown("context=work") == {pref.pk}
    assert shown("entity=person:sarah") == {pref.pk}
    assert shown("status=archived") == {gone.pk}
    assert shown("status=all") == {host.pk, pref.pk, gone.pk}
    assert shown("status=archived&q=VPN") == {gone.pk}  # full text over archived items
    assert shown("category=nonsense&status=sideways") == {host.pk, pref.pk}
    # Search takes the same filters (context also brings global items, as for agents).
    assert shown("q=replies&category=preference") == {pref.pk}


def test_empty_states_say_what_to_do(viewer, workspace):
    assert "POST /api/v1/knowledge/" in viewer.get("/knowledge/").content.decode()
    KnowledgeFactory(workspace=workspace)
    html = viewer.get("/knowledge/?context=nowhere", **HX).content.decode()
    assert "No knowledge matches these filters." in html
    html = viewer.get("/knowledge/?q=zebra+quantum&category=reminder", **HX)
    assert "Recall finds nothing" in html.content.decode()


# --- one item ------------------------------------------------------------------------------------


def test_the_item_page_shows_history_strength_and_activity(reviewer, workspace, host):
    result = knowledge_update(
        workspace=workspace,
        item_id=host.pk,
        actor=person_actor("ada"),
        changes={"content": "The staging database host is db4.internal."},
        reason="moved",
    )
    new = result.item
    html = reviewer.get(f"/knowledge/{host.pk}/").content.decode()
    assert "This is an older version" in html and f"item #{new.pk}" in html
    assert f'id="version-{host.pk}"' in html and f'id="version-{new.pk}"' in html
    assert "knowledge.supersede" in html and "“moved”" in html
    assert "Edit…" not in html  # act on the current version
    current = reviewer.get(f"/knowledge/{new.pk}/").content.decode()
    assert "Edit…" in current and "Archive…" in current and "Delete…" in current


def test_the_item_page_is_also_a_fragment(viewer, host):
    html = viewer.get(f"/knowledge/{host.pk}/", **HX).content.decode()
    assert html.lstrip().startswith(f'<div id="knowledge-main" data-item="{host.pk}"')
    assert "Edit…" not in html  # viewers read only


def test_a_reviewer_edits_content_into_a_new_version(reviewer, workspace, host):
    response = reviewer.post(
        f"/knowledge/{host.pk}/edit/",
        {
            "content": "The staging database host is db5.internal.",
            "category": "fact",
            "context": "global",
            "reason": "the host moved",
        },
        **HX,
    )
    assert response.status_code == 200
    new = Knowledge.objects.get(workspace=workspace, superseded_by__isnull=True)
    assert new.pk != host.pk and new.source == "user"
    # The pushed URL names its workspace, like every internal link (reviews/links.py).
    assert response["HX-Push-Url"] == f"/knowledge/{new.pk}/?ws={workspace.name}"
    assert "db5.internal" in response.content.decode()
    event = AuditEvent.objects.get(action="knowledge.supersede")
    assert event.reason == "the host moved" and event.actor.startswith("user:")


def test_an_edit_in_place_is_audited_with_the_fields_not_the_values(reviewer, host):
    response = reviewer.post(
        f"/knowledge/{host.pk}/edit/",
        {
            "content": host.content,
            "category": "note",
            "context": "work",
            "sensitive": "on",
            "reason": "it is about a person",
        },
        **HX,
    )
    assert response.status_code == 200 and "HX-Push-Url" not in response
    host.refresh_from_db()
    assert (host.category, host.context, host.sensitive) == ("note", "work", True)
    event = AuditEvent.objects.get(action="knowledge.update")
    assert event.details == {"fields": ["category", "context", "sensitive"]}
    assert event.reason == "it is about a person"


def test_an_edit_the_service_refuses_names_the_field(reviewer, host):
    response = reviewer.post(
        f"/knowledge/{host.pk}/edit/",
        {
            "content": "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "category": "fact",
            "reason": "x",
        },
        **HX,
    )
    assert response.status_code == 422
    assert '<details class="confirm edit" open>' in response.content.decode()
    assert Knowledge.objects.filter(workspace=host.workspace).count() == 1
    too_long = reviewer.post(
        f"/knowledge/{host.pk}/edit/",
        {"content": "x" * 2001, "category": "fact", "reason": "x"},
        **HX,
    )
    assert too_long.status_code == 422 and "2000" in too_long.content.decode()


def test_archive_and_restore_with_reasons(reviewer, host):
    response = reviewer.post(f"/knowledge/{host.pk}/archive/", {"reason": "not true now"}, **HX)
    assert response.status_code == 200
    assert 'data-testid="knowledge-status">archived</span>' in response.content.decode()
    host.refresh_from_db()
    assert host.status == "archived"
    response = reviewer.post(f"/knowledge/{host.pk}/restore/", {"reason": "true again"}, **HX)
    assert 'data-testid="knowledge-status">active</span>' in response.content.decode()
    reasons = dict(
        AuditEvent.objects.filter(target_id=str(host.pk)).values_list("action", "reason")
    )
    assert reasons == {"knowledge.archive": "not true now", "knowledge.restore": "true again"}


def test_a_restored_item_is_not_archived_again_by_the_next_decay(reviewer, host):
    long_ago = timezone.now() - timedelta(days=200)
    Knowledge.objects.filter(pk=host.pk).update(created_at=long_ago, last_used_at=long_ago)
    decay_run()
    host.refresh_from_db()
    assert host.status == "archived"
    reviewer.post(f"/knowledge/{host.pk}/restore/", {"reason": "still true"}, **HX)
    decay_run()
    host.refresh_from_db()
    assert host.status == "active"


def test_an_action_without_a_reason_is_refused_in_place(reviewer, host):
    response = reviewer.post(f"/knowledge/{host.pk}/archive/", {"reason": ""}, **HX)
    assert response.status_code == 422 and "Say why" in response.content.decode()
    host.refresh_from_db()
    assert host.status == "active"


def test_a_person_deletes_an_item_and_its_versions_for_good(reviewer, workspace, host):
    new = knowledge_update(
        workspace=workspace,
        item_id=host.pk,
        actor=person_actor("ada"),
        changes={"content": "The staging host is db9."},
    ).item
    response = reviewer.post(f"/knowledge/{new.pk}/delete/", {"reason": "asked to forget"}, **HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert f'data-deleted="{new.pk}"' in html and "2 rows" in html
    assert not Knowledge.objects.filter(workspace=workspace).exists()
    event = AuditEvent.objects.get(action="knowledge.delete")
    assert event.reason == "asked to forget" and "db9" not in str(event.details)
    assert reviewer.get(f"/knowledge/{new.pk}/").status_code == 404


def test_without_htmx_actions_redirect(reviewer, host):
    response = reviewer.post(f"/knowledge/{host.pk}/archive/", {"reason": "old"})
    assert (
        response.status_code == 303 and without_ws(response["Location"]) == f"/knowledge/{host.pk}/"
    )
    response = reviewer.post(f"/knowledge/{host.pk}/delete/", {"reason": "gone"})
    assert response.status_code == 303 and without_ws(response["Location"]) == "/knowledge/"


# --- roles and workspaces --------------------------------------------------------------------------


@pytest.mark.parametrize("verb", ACTIONS)
def test_viewers_cannot_act(viewer, host, verb):
    body = {"reason": "x", "content": "Changed.", "category": "fact"}
    assert viewer.post(f"/knowledge/{host.pk}/{verb}/", body, **HX).status_code == 403
    host.refresh_from_db()
    assert host.status == "active" and host.content.startswith("The staging")


@pytest.mark.parametrize("verb", ACTIONS)
def test_another_workspaces_item_is_not_found(reviewer, verb):
    foreign = KnowledgeFactory(workspace=WorkspaceFactory(), content="Their secret plan.")
    body = {"reason": "x", "content": "Changed.", "category": "fact"}
    assert reviewer.post(f"/knowledge/{foreign.pk}/{verb}/", body, **HX).status_code == 404
    assert reviewer.get(f"/knowledge/{foreign.pk}/").status_code == 404
    assert Knowledge.objects.filter(pk=foreign.pk, status="active").exists()


def test_another_workspaces_items_never_show_up(viewer, workspace):
    foreign = KnowledgeFactory(workspace=WorkspaceFactory(), content="Their staging host is x.")
    for url in ("/knowledge/", "/knowledge/?q=staging+host", "/knowledge/?status=all"):
        assert f'id="knowledge-{foreign.pk}"' not in viewer.get(url, **HX).content.decode()


# --- at scale ------------------------------------------------------------------------------------


def test_the_list_and_search_stay_bounded_at_10000_items(
    viewer, workspace, django_assert_max_num_queries
):
    Knowledge.objects.bulk_create(
        [
            Knowledge(
                workspace=workspace,
                content=f"Fact {i} about service number {i % 500}.",
                category="fact" if i % 4 else "preference",
                context="work" if i % 3 else "global",
                sensitive=i % 50 == 0,
                status="archived" if i % 10 == 0 else "active",
            )
            for i in range(10_000)
        ],
        batch_size=2_000,
    )
    viewer.get("/knowledge/")
    # session, user, membership, page, nav counters (3), memberships
    with django_assert_max_num_queries(8):
        response = viewer.get("/knowledge/")
    page = response.context["page"]
    assert len(page) == 50 and page.next_query
    query = page.next_query
    for _ in range(5):
        with django_assert_max_num_queries(4):
            page = viewer.get(f"/knowledge/{query}", **HX).context["page"]
        query = page.next_query
    for query in ("?category=preference&context=work", "?status=archived", "?sensitive=1"):
        with django_assert_max_num_queries(4):
            assert len(viewer.get(f"/knowledge/{query}", **HX).context["page"]) == 50
    # A search is one recall statement (plus the transaction's two set_config calls),
    # one for the hits' similarities (the cut-off) and one for word stems (the marks).
    with django_assert_max_num_queries(9):
        hits = viewer.get("/knowledge/?q=service+number+42&top=50", **HX).context["hits"]
    assert len(hits) == 50


# --- a person's confirmation (the person channel) ------------------------------------------


def test_a_reviewer_confirms_an_item_with_a_reason(reviewer, host):
    assert "Only claimed" in reviewer.get(f"/knowledge/{host.pk}/").content.decode()
    response = reviewer.post(
        f"/knowledge/{host.pk}/confirm/", {"reason": "checked the config"}, **HX
    )
    assert response.status_code == 200
    host.refresh_from_db()
    assert host.confidence == pytest.approx(0.65)
    change = ConfidenceChange.objects.get(target_type="knowledge", target_id=host.pk)
    assert (change.channel, change.kind) == ("person", "user_confirmed")
    assert AuditEvent.objects.filter(action="knowledge.confirm", target_id=host.pk).exists()
    assert "Earned" in response.content.decode()


def test_a_viewer_cannot_confirm_an_item(viewer, host):
    assert viewer.post(f"/knowledge/{host.pk}/confirm/", {"reason": "x"}).status_code == 403
    host.refresh_from_db()
    assert host.confidence == 0.5
    assert not ConfidenceChange.objects.filter(target_id=host.pk).exists()


def test_a_reconcile_decision_shows_in_both_items_history(viewer, workspace):
    items = plant(workspace)
    reconcile_workspace(workspace=workspace, judge=HeuristicJudge())
    old, new = items["old_pg"], items["new_pg"]
    for pk in (old.pk, new.pk):
        html = viewer.get(f"/knowledge/{pk}/").content.decode()
        assert '<span class="badge action">reconcile.decide</span>' in html
        assert f"judged <b>contradiction</b> by heuristic: superseded, kept #{new.pk}" in html
