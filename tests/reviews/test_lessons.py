"""Lessons screens: the browser, a lesson's page, and a reviewer's actions on it."""

import pytest

from memory.identity.projects import project_label_set
from memory.lessons.evidence import evidence_apply
from memory.lessons.lifecycle import lesson_edit
from memory.models import AuditEvent, ConfidenceChange, Lesson, LessonEvidence, LessonState, Outcome
from tests.factories.identity import WorkspaceFactory, person_actor
from tests.factories.lessons import BLOG, LessonFactory, digest
from tests.factories.review import LessonEvidenceFactory, OutcomeFactory
from tests.reviews import without_ws

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
ACTIONS = ("retire", "restore", "pin", "unpin", "seal", "unseal", "edit")


@pytest.fixture
def viewer(member_client, workspace):
    return member_client(workspace=workspace, role="viewer")


@pytest.fixture
def reviewer(member_client, workspace):
    return member_client(workspace=workspace, role="reviewer")


@pytest.fixture
def lesson(workspace):
    lesson = LessonFactory(workspace=workspace, text="Prefer uv over pip for requirements.txt.")
    LessonEvidenceFactory(lesson=lesson, outcome=OutcomeFactory(workspace=workspace))
    return lesson


# --- the browser ------------------------------------------------------------------------


def test_it_lists_lessons_as_a_full_page(viewer, workspace, lesson):
    response = viewer.get("/lessons/")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    assert 'id="rows"' in html and 'name="scope"' in html and 'name="project"' in html
    row = html[html.index(f'id="lesson-{lesson.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "Prefer uv over pip" in row and "<code>pytest:.</code>" in row
    assert 'class="conf-fill" style="width: 50%"' in row and "0.50" in row
    assert '<span class="badge active">active</span>' in row
    assert 'title="1 supporting outcome"' in row
    assert digest()[:10] in row
    assert "HX-Request" in response["Vary"]


def test_it_serves_the_rows_fragment_to_htmx(viewer, lesson):
    html = viewer.get("/lessons/", **HX).content.decode()
    assert html.lstrip().startswith('<div id="rows"')
    assert "<html" not in html and 'name="scope"' not in html
    assert f'id="lesson-{lesson.pk}"' in html


def test_it_filters_by_scope_project_state_operation_and_text(viewer, workspace, lesson):
    blog = LessonFactory(
        workspace=workspace,
        project_digest=digest(BLOG),
        operation_key="npm:test",
        text="Use npm ci.",
    )
    world = LessonFactory(
        workspace=workspace, scope="global", project_digest="", text="Pin the Python version."
    )
    gone = LessonFactory(
        workspace=workspace,
        state="retired",
        retired_by="person",
        text="Never run tests in parallel.",
    )

    def shown(query):
        html = viewer.get(f"/lessons/?{query}", **HX).content.decode()
        return {pk for pk in (lesson.pk, blog.pk, world.pk, gone.pk) if f'id="lesson-{pk}"' in html}

    assert shown("") == {lesson.pk, blog.pk, world.pk, gone.pk}
    assert shown("scope=global") == {world.pk}
    assert shown(f"project={digest(BLOG)}") == {blog.pk}
    assert shown("state=retired") == {gone.pk}
    assert shown("op=npm:test") == {blog.pk}
    assert shown("q=PYTHON") == {world.pk}
    assert shown("q=npm") == {blog.pk}  # the operation matches too
    assert shown("state=exploded&scope=sideways") == {lesson.pk, blog.pk, world.pk, gone.pk}


def test_it_orders_by_confidence_when_asked(viewer, workspace):
    low = LessonFactory(workspace=workspace, confidence=0.25)
    high = LessonFactory(workspace=workspace, confidence=0.9)
    page = viewer.get("/lessons/?sort=weak", **HX).context["page"]
    assert [item.pk for item in page] == [low.pk, high.pk]
    page = viewer.get("/lessons/?sort=strong", **HX).context["page"]
    assert [item.pk for item in page] == [high.pk, low.pk]


def test_superseded_rows_are_not_listed_but_their_current_version_is(viewer, workspace, lesson):
    edited = lesson_edit(lesson=lesson, text="Prefer uv pip install.", actor=person_actor("test"))
    html = viewer.get("/lessons/", **HX).content.decode()
    assert f'id="lesson-{edited.pk}"' in html and f'id="lesson-{lesson.pk}"' not in html


def test_the_project_filter_shows_labels(viewer, workspace, lesson):
    project_label_set(
        workspace=workspace,
        project_digest=digest(),
        label="acme/shop",
        actor=person_actor("ada"),
    )
    html = viewer.get("/lessons/").content.decode()
    assert f'<option value="{digest()}">acme/shop · {digest()[:10]}</option>' in html
    assert '<strong class="project-label">acme/shop</strong>' in html


def test_empty_states_say_what_to_do(viewer, workspace):
    assert "POST /api/v1/outcomes/" in viewer.get("/lessons/").content.decode()
    LessonFactory(workspace=workspace)
    html = viewer.get("/lessons/?q=nothing-like-this", **HX).content.decode()
    assert "No lessons match these filters." in html and "Clear the filters" in html


# --- a lesson's page ----------------------------------------------------------------------


def test_the_lesson_page_links_evidence_to_outcomes(viewer, workspace, lesson):
    outcome = lesson.evidence.get().outcome
    failed = OutcomeFactory(workspace=workspace, passed=False)
    LessonEvidenceFactory(lesson=lesson, outcome=failed, relation="contradicts")
    response = viewer.get(f"/lessons/{lesson.pk}/")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    assert f'href="/outcomes/{outcome.pk}/">#{outcome.pk}</a>' in without_ws(html)
    assert f'href="/outcomes/{failed.pk}/">#{failed.pk}</a>' in without_ws(html)
    assert '<span class="badge failed">contradicts</span>' in html
    assert "Prefer uv over pip for requirements.txt." in html
    # Viewers read; the actions are for reviewers.
    assert "Retire…" not in html


def test_the_lesson_page_is_also_an_htmx_fragment(viewer, lesson):
    html = viewer.get(f"/lessons/{lesson.pk}/", **HX).content.decode()
    assert html.lstrip().startswith(f'<div id="lesson-main" data-lesson="{lesson.pk}"')
    assert "<html" not in html


def test_the_history_shows_each_version_with_its_evidence_and_ledger(reviewer, workspace, lesson):
    outcome = lesson.evidence.get().outcome
    evidence_apply(
        target=lesson, kind="test_passed", evidence_id=f"outcome:{outcome.pk}", channel="harness"
    )
    edited = lesson_edit(lesson=lesson, text="Prefer uv pip install.", actor=person_actor("test"))
    html = reviewer.get(f"/lessons/{lesson.pk}/").content.decode()
    history = html[html.index('id="history"') :]
    assert history.index(f'id="version-{lesson.pk}"') < history.index(f'id="version-{edited.pk}"')
    assert f"edited → #{edited.pk}" in history
    assert '0.50 → <b class="up">0.65</b>' in history
    assert f'<a href="/outcomes/{outcome.pk}/">outcome #{outcome.pk}</a>' in without_ws(history)
    # The edited version inherited the evidence.
    assert history.count(f"+ outcome #{outcome.pk}") == 2
    # An older version says so and offers no actions.
    assert "This is an older version" in html and f"lesson #{edited.pk}" in html
    assert "Retire…" not in html
    assert "Retire…" in reviewer.get(f"/lessons/{edited.pk}/").content.decode()


def test_other_workspaces_lessons_are_not_found(viewer):
    foreign = LessonFactory(workspace=WorkspaceFactory())
    assert viewer.get(f"/lessons/{foreign.pk}/").status_code == 404
    assert viewer.get("/lessons/999999999/").status_code == 404
    assert f'id="lesson-{foreign.pk}"' not in viewer.get("/lessons/", **HX).content.decode()


# --- actions --------------------------------------------------------------------------------


def test_a_reviewer_retires_a_lesson_with_a_reason(reviewer, lesson):
    response = reviewer.post(f"/lessons/{lesson.pk}/retire/", {"reason": "wrong since CI"}, **HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="lesson-main"')
    assert 'data-testid="lesson-state">retired</span>' in html
    assert "by person" in html and "“wrong since CI”" in html
    assert 'id="nav" class="nav" aria-label="Main" hx-swap-oob="true"' in html
    assert "retired. Agents no longer get it" in html  # the toast
    lesson.refresh_from_db()
    assert lesson.state == LessonState.RETIRED and lesson.retired_by == "person"
    event = AuditEvent.objects.get(action="lesson.retire", target_id=str(lesson.pk))
    assert event.actor == f"user:{reviewer.user.username}" and event.reason == "wrong since CI"
    assert "Restore…" in html


def test_retiring_without_a_reason_is_refused_in_place(reviewer, lesson):
    response = reviewer.post(f"/lessons/{lesson.pk}/retire/", {"reason": "  "}, **HX)
    assert response.status_code == 422
    html = response.content.decode()
    assert "Say why: the reason is kept in the audit log." in html
    assert '<details class="confirm" open>' in html
    lesson.refresh_from_db()
    assert lesson.state == LessonState.ACTIVE


def test_a_reviewer_restores_a_retired_lesson(reviewer, lesson):
    reviewer.post(f"/lessons/{lesson.pk}/retire/", {"reason": "wrong"}, **HX)
    response = reviewer.post(f"/lessons/{lesson.pk}/restore/", {"reason": "it was right"}, **HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-testid="lesson-state">active</span>' in html
    lesson.refresh_from_db()
    assert lesson.state == LessonState.ACTIVE
    assert AuditEvent.objects.get(action="lesson.restore").reason == "it was right"


def test_restoring_a_lesson_below_the_floor_goes_through_the_ledger(reviewer, workspace):
    lesson = LessonFactory(
        workspace=workspace, confidence=0.1, state="retired", retired_by="system"
    )
    reviewer.post(f"/lessons/{lesson.pk}/restore/", {"reason": "decayed too far"}, **HX)
    change = ConfidenceChange.objects.get(target_type="lesson", target_id=lesson.pk)
    assert (change.before, change.after, change.cause, change.kind) == (
        0.1,
        0.2,
        "person",
        "restore",
    )


@pytest.mark.parametrize(
    "verb, field, value, badge",
    [("pin", "pinned", True, "pinned"), ("seal", "sealed", True, "sealed")],
)
def test_a_reviewer_pins_and_seals_then_undoes_it(reviewer, lesson, verb, field, value, badge):
    html = reviewer.post(f"/lessons/{lesson.pk}/{verb}/", {"reason": "important"}, **HX)
    assert html.status_code == 200
    assert f'<span class="badge {badge}"' in html.content.decode()
    assert f"Un{verb}…" in html.content.decode()
    lesson.refresh_from_db()
    assert getattr(lesson, field) is value
    reviewer.post(f"/lessons/{lesson.pk}/un{verb}/", {"reason": "not any more"}, **HX)
    lesson.refresh_from_db()
    assert getattr(lesson, field) is False
    actions = AuditEvent.objects.filter(target_id=str(lesson.pk)).values_list("action", "reason")
    assert set(actions) >= {(f"lesson.{verb}", "important"), (f"lesson.un{verb}", "not any more")}


def test_a_refused_action_shows_the_services_reason(reviewer, workspace):
    retired = LessonFactory(workspace=workspace, state="retired", retired_by="person")
    response = reviewer.post(f"/lessons/{retired.pk}/pin/", {"reason": "x"}, **HX)
    assert response.status_code == 422
    assert "restore it before you pin it" in response.content.decode()


def test_an_edit_writes_a_new_version_and_the_page_shows_it(reviewer, lesson):
    response = reviewer.post(
        f"/lessons/{lesson.pk}/edit/",
        {"text": "Prefer uv pip install for requirements.txt.", "operation_key": "pytest:.", "reason": "clearer"},
        **HX,
    )  # fmt: skip
    assert response.status_code == 200
    edited = Lesson.objects.get(superseded_by__isnull=True, workspace=lesson.workspace)
    assert edited.pk != lesson.pk and edited.source == "user"
    # The pushed URL names its workspace, like every internal link (reviews/links.py).
    assert response["HX-Push-Url"] == f"/lessons/{edited.pk}/?ws={lesson.workspace.name}"
    html = response.content.decode()
    assert f'data-lesson="{edited.pk}"' in html
    assert "Prefer uv pip install for requirements.txt." in html
    assert f"Saved as lesson {edited.pk}" in html
    lesson.refresh_from_db()
    assert lesson.superseded_by_id == edited.pk
    assert LessonEvidence.objects.filter(lesson=edited).count() == 1  # evidence inherited
    assert AuditEvent.objects.get(action="lesson.edit").reason == "clearer"


def test_an_edit_cannot_move_a_lesson_to_another_operation(reviewer, lesson):
    response = reviewer.post(
        f"/lessons/{lesson.pk}/edit/",
        {"text": lesson.text, "operation_key": "uv:pip-install", "reason": "other op"},
        **HX,
    )
    assert response.status_code == 422
    assert "operation cannot change" in response.content.decode()
    lesson.refresh_from_db()
    assert (lesson.operation_key, lesson.superseded_by_id) == ("pytest:.", None)


def test_an_invalid_edit_is_refused_with_the_field_named(reviewer, lesson):
    response = reviewer.post(
        f"/lessons/{lesson.pk}/edit/",
        {"text": "x" * 300, "operation_key": "pytest:.", "reason": "longer"},
        **HX,
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert "at most 280 characters" in html
    assert '<details class="confirm edit" open>' in html
    assert Lesson.objects.filter(workspace=lesson.workspace).count() == 1


def test_without_htmx_actions_redirect_to_the_lesson(reviewer, lesson):
    response = reviewer.post(f"/lessons/{lesson.pk}/retire/", {"reason": "wrong"})
    assert (
        response.status_code == 303 and without_ws(response["Location"]) == f"/lessons/{lesson.pk}/"
    )
    response = reviewer.post(
        f"/lessons/{lesson.pk}/edit/", {"text": "New.", "operation_key": "x", "reason": "r"}
    )
    assert response.status_code == 303  # refused (retired): the message shows on the page
    html = reviewer.get(f"/lessons/{lesson.pk}/").content.decode()
    assert "is retired; it cannot be edited" in html


def test_a_reviewer_names_the_project_in_place(reviewer, workspace, lesson):
    url = f"/projects/{digest()}/label/"
    response = reviewer.post(url, {"label": "acme/shop"}, **HX)
    assert response.status_code == 200
    assert '<strong class="project-label">acme/shop</strong>' in response.content.decode()
    assert "acme/shop" in reviewer.get(f"/lessons/{lesson.pk}/").content.decode()
    too_long = reviewer.post(url, {"label": "x" * 90}, **HX)
    assert too_long.status_code == 422 and "at most 80 characters" in too_long.content.decode()


# --- roles and workspaces ---------------------------------------------------------------------


@pytest.mark.parametrize("verb", ACTIONS)
def test_viewers_cannot_act(viewer, lesson, verb):
    body = {"reason": "x", "text": "New words.", "operation_key": "pytest:."}
    response = viewer.post(f"/lessons/{lesson.pk}/{verb}/", body, **HX)
    assert response.status_code == 403
    lesson.refresh_from_db()
    assert (lesson.state, lesson.pinned, lesson.sealed) == ("active", False, False)
    assert Lesson.objects.filter(workspace=lesson.workspace).count() == 1
    assert viewer.post(f"/projects/{digest()}/label/", {"label": "x"}).status_code == 403


@pytest.mark.parametrize("verb", ACTIONS)
def test_another_workspaces_lesson_is_not_found_for_actions(reviewer, verb):
    foreign = LessonFactory(workspace=WorkspaceFactory())
    body = {"reason": "x", "text": "New words.", "operation_key": "pytest:."}
    assert reviewer.post(f"/lessons/{foreign.pk}/{verb}/", body, **HX).status_code == 404
    foreign.refresh_from_db()
    assert foreign.state == "active" and not foreign.pinned


def test_actions_need_post(reviewer, lesson):
    assert reviewer.get(f"/lessons/{lesson.pk}/retire/").status_code == 405


def test_actions_need_the_csrf_token(member_client, workspace, lesson):
    from django.test import Client

    csrf_client = Client(enforce_csrf_checks=True)
    user = member_client(workspace=workspace, role="reviewer").user
    csrf_client.force_login(user)
    response = csrf_client.post(f"/lessons/{lesson.pk}/retire/", {"reason": "x"}, **HX)
    assert response.status_code == 403
    lesson.refresh_from_db()
    assert lesson.state == LessonState.ACTIVE


# --- at scale --------------------------------------------------------------------------------


def test_the_list_stays_bounded_at_10000_lessons(viewer, workspace, django_assert_max_num_queries):
    outcome = OutcomeFactory(workspace=workspace)
    rows = Lesson.objects.bulk_create(
        [
            Lesson(
                workspace=workspace,
                text=f"Lesson number {i} about the build.",
                normalized_text=f"lesson number {i} about the build",
                operation_key=f"op:{i % 40}",
                scope="project",
                project_digest=digest() if i % 2 else digest(BLOG),
                confidence=(i % 90 + 5) / 100,
                birth_confidence=0.5,
                state="retired" if i % 10 == 0 else "active",
                retired_by="system" if i % 10 == 0 else "",
                source="loop",
            )
            for i in range(10_000)
        ],
        batch_size=2_000,
    )
    LessonEvidence.objects.bulk_create(
        [LessonEvidence(lesson=row, outcome=outcome) for row in rows[:3_000]], batch_size=2_000
    )
    viewer.get("/lessons/")
    # session, user, membership, page (with evidence counts), its project labels, nav
    # counters (3), memberships, the filter's projects and their labels
    with django_assert_max_num_queries(11):
        response = viewer.get("/lessons/")
    page = response.context["page"]
    assert len(page) == 50 and page.next_query
    query = page.next_query
    for _ in range(5):
        # session, user, membership, page, labels: a deep page costs what the first does
        with django_assert_max_num_queries(5):
            page = viewer.get(f"/lessons/{query}", **HX).context["page"]
        query = page.next_query
    for query in (
        "?sort=weak",
        "?state=retired&op=op:10",
        "?q=number 99",
        f"?project={digest(BLOG)}",
    ):
        with django_assert_max_num_queries(5):
            filtered = viewer.get(f"/lessons/{query}", **HX)
        assert filtered.status_code == 200 and len(filtered.context["page"]) > 0


def test_a_lesson_with_many_outcomes_shows_the_newest_few(viewer, workspace):
    lesson = LessonFactory(workspace=workspace)
    agent = OutcomeFactory(workspace=workspace).agent
    outcomes = Outcome.objects.bulk_create(
        [
            Outcome(workspace=workspace, agent=agent, outcome_id=f"bulk-{i}", session_id="s",
                    project_digest=digest(), passed=True)
            for i in range(120)
        ]
    )  # fmt: skip
    LessonEvidence.objects.bulk_create([LessonEvidence(lesson=lesson, outcome=o) for o in outcomes])
    html = viewer.get(f"/lessons/{lesson.pk}/").content.decode()
    assert "(120 outcomes, the newest 50 shown)" in html
    assert html.count('<span class="badge active">supports</span>') == 50
    assert f'href="/outcomes/{outcomes[-1].pk}/">#{outcomes[-1].pk}</a>' in without_ws(html)
    assert f'href="/outcomes/{outcomes[0].pk}/">#{outcomes[0].pk}</a>' not in without_ws(html)
    assert "and 100 older" in html


# --- a person's confirmation (the person channel) ---------------------------------------


def test_a_reviewer_confirms_a_claimed_lesson_and_it_becomes_active(reviewer, workspace):
    claimed = LessonFactory(workspace=workspace, state=LessonState.CLAIMED, confidence=0.3)
    page = reviewer.get(f"/lessons/{claimed.pk}/").content.decode()
    assert f"/lessons/{claimed.pk}/confirm/" in page
    assert "Only claimed" in page
    response = reviewer.post(
        f"/lessons/{claimed.pk}/confirm/", {"reason": "I checked it on the CI image"}, **HX
    )
    assert response.status_code == 200
    claimed.refresh_from_db()
    assert claimed.state == LessonState.ACTIVE
    assert claimed.confidence == pytest.approx(0.45)
    change = ConfidenceChange.objects.get(target_type="lesson", target_id=claimed.pk)
    assert (change.channel, change.kind) == ("person", "user_confirmed")
    event = AuditEvent.objects.get(action="lesson.confirm", target_id=claimed.pk)
    assert event.actor.startswith("user:") and event.reason == "I checked it on the CI image"
    html = response.content.decode()
    assert "Earned" in html and "a person" in html


def test_a_viewer_cannot_confirm(viewer, workspace):
    claimed = LessonFactory(workspace=workspace, state=LessonState.CLAIMED, confidence=0.3)
    response = viewer.post(f"/lessons/{claimed.pk}/confirm/", {"reason": "looks right"})
    assert response.status_code == 403
    claimed.refresh_from_db()
    assert (claimed.state, claimed.confidence) == (LessonState.CLAIMED, 0.3)


def test_a_confirmation_needs_a_reason(reviewer, workspace):
    claimed = LessonFactory(workspace=workspace, state=LessonState.CLAIMED, confidence=0.3)
    response = reviewer.post(f"/lessons/{claimed.pk}/confirm/", {"reason": ""}, **HX)
    assert response.status_code == 422
    claimed.refresh_from_db()
    assert claimed.state == LessonState.CLAIMED


def test_the_evidence_table_says_who_reported_each_outcome(viewer, workspace, lesson):
    own_word = OutcomeFactory(workspace=workspace, channel="agent")
    LessonEvidenceFactory(lesson=lesson, outcome=own_word)
    html = viewer.get(f"/lessons/{lesson.pk}/").content.decode()
    assert "harness-verified" in html and "agent&#x27;s own word" in html


def test_the_changed_since_filter_is_the_dashboards_rule(viewer, workspace):
    from datetime import timedelta

    from django.utils import timezone

    from memory.lessons.lifecycle import lesson_retire

    gone = LessonFactory(workspace=workspace, text="Gone.", normalized_text="gone")
    kept = LessonFactory(workspace=workspace, text="Kept.", normalized_text="kept")
    lesson_retire(lesson=gone, actor=person_actor("ada"), reason="wrong")
    since = (timezone.localdate() - timedelta(days=29)).isoformat()
    dashboard = viewer.get("/dashboard/").content.decode()
    assert f"/lessons/?changed=retired&amp;since={since}" in dashboard
    assert 'data-testid="retired-count"' in dashboard and ">−1</a>" in dashboard
    page = viewer.get(f"/lessons/?changed=retired&since={since}").content.decode()
    assert "<html" in page and '<option value="retired" selected>retired since</option>' in page
    assert f'id="lesson-{gone.pk}"' in page and f'id="lesson-{kept.pk}"' not in page
    rows = viewer.get(f"/lessons/?changed=retired&since={since}", **HX).content.decode()
    assert "<html" not in rows and f'id="lesson-{gone.pk}"' in rows
    # A day it cannot read falls back to the dashboard's window; an unknown change is ignored.
    fallback = viewer.get("/lessons/?changed=retired&since=yesterday").content.decode()
    assert f'value="{since}"' in fallback and f'id="lesson-{kept.pk}"' not in fallback
    assert f'id="lesson-{kept.pk}"' in viewer.get("/lessons/?changed=born").content.decode()
