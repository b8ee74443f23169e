import pytest

from memory.models import AuditEvent, ConversationTurn
from tests.factories.knowledge import TurnFactory

pytestmark = pytest.mark.django_db

GITHUB_TOKEN = "ghp_" + "Zz98" * 9


def _turn(api, session="s-1", **body):
    payload = {"role": "user", "content": "Can we move standup to ten?", "turn_index": 0, **body}
    return api.post(f"/api/v1/sessions/{session}/turns/", payload, format="json")


def _error(response):
    return response.json()["error"]


# --------------------------------------------------------------------------- turns


def test_it_stores_a_turn(api):
    response = _turn(api, context="work")
    assert response.status_code == 201
    body = response.json()
    assert body["recorded"] is True and body["session_id"] == "s-1"
    turn = ConversationTurn.objects.get(pk=body["id"])
    assert (turn.role, turn.turn_index, turn.context, turn.agent) == ("user", 0, "work", api.agent)


def test_a_retried_turn_answers_200_with_the_same_row(api):
    first = _turn(api).json()
    again = _turn(api)
    assert again.status_code == 200
    assert again.json()["id"] == first["id"]
    assert ConversationTurn.objects.count() == 1


def test_the_same_turn_with_other_content_is_a_409(api):
    _turn(api)
    response = _turn(api, content="something else")
    assert response.status_code == 409
    assert list(_error(response)["fields"]) == ["turn_index"]
    assert ConversationTurn.objects.get().content == "Can we move standup to ten?"


def test_an_incognito_turn_records_nothing_and_says_so(api):
    audit_before = AuditEvent.objects.count()
    response = _turn(api, incognito=True, content="private: my salary is 90k")
    assert response.status_code == 202
    assert response.json() == {"recorded": False}
    assert not ConversationTurn.objects.exists()
    assert AuditEvent.objects.count() == audit_before


def test_a_turn_with_a_credential_is_refused(api):
    response = _turn(api, content="here is my token " + GITHUB_TOKEN)
    assert response.status_code == 422
    assert _error(response)["code"] == "credential_refused"
    assert not ConversationTurn.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"role": "narrator"}, "role"),
        ({"content": ""}, "content"),
        ({"content": "x" * 20001}, "content"),
        ({"turn_index": -1}, "turn_index"),
        ({"turn_index": "first"}, "turn_index"),
        ({"extra": 1}, "extra"),
    ],
)
def test_turn_validation_errors_are_400s(api, body, field):
    response = _turn(api, **body)
    assert response.status_code == 400
    assert field in _error(response)["fields"]


def test_a_session_id_over_200_characters_is_a_400(api):
    response = _turn(api, session="s" * 201)
    assert response.status_code == 400
    assert list(_error(response)["fields"]) == ["session_id"]


def test_it_lists_a_sessions_turns_in_order(api):
    ws = api.agent.workspace
    for index in (2, 0, 1):
        TurnFactory(workspace=ws, agent=api.agent, session_id="s-9", turn_index=index)
    TurnFactory(workspace=ws, agent=api.agent, session_id="other")
    body = api.get("/api/v1/sessions/s-9/turns/").json()
    assert [t["turn_index"] for t in body["results"]] == [0, 1, 2]
    assert body["count"] == 3


# --------------------------------------------------------------------------- search


def test_search_finds_turns_with_ranked_snippets(api):
    ws = api.agent.workspace
    best = TurnFactory(
        workspace=ws, content="The postgres migration failed because the disk was full"
    )
    TurnFactory(workspace=ws, content="Postgres is our database")
    TurnFactory(workspace=ws, content="Lunch at noon")
    response = api.get("/api/v1/conversations/search/", {"q": "postgres migration"})
    assert response.status_code == 200
    body = response.json()
    # The all-word match ranks first; the any-word match fills the page after it.
    assert body["mode"] == "all" and body["count"] == 2
    hit = body["results"][0]
    assert hit["id"] == best.pk
    assert "**postgres**" in hit["snippet"].lower() and "**migration**" in hit["snippet"].lower()


def test_search_falls_back_to_any_word(api):
    ws = api.agent.workspace
    TurnFactory(workspace=ws, content="Postgres is our database")
    TurnFactory(workspace=ws, content="The migration ran overnight")
    body = api.get("/api/v1/conversations/search/", {"q": "postgres migration"}).json()
    assert body["mode"] == "any" and body["count"] == 2


def test_search_fills_the_page_with_any_word_matches_after_all_word_ones(api):
    ws = api.agent.workspace
    both = TurnFactory(workspace=ws, session_id="s1", content="tennis racket restring")
    partial = [
        TurnFactory(workspace=ws, session_id=f"s{i}", content=f"my racket number {i}")
        for i in range(2, 6)
    ]
    TurnFactory(workspace=ws, session_id="s9", content="racket sports and tennis elbow -- no")
    TurnFactory(workspace=ws, content="unrelated lunch plans")
    body = api.get(
        "/api/v1/conversations/search/", {"q": "tennis racket restring", "limit": 5}
    ).json()
    ids = [r["id"] for r in body["results"]]
    assert body["mode"] == "all" and ids[0] == both.pk
    assert len(ids) == 5 and body["count"] == 6
    assert set(ids[1:]) <= {p.pk for p in partial} | {ids[1]}


def test_search_fill_keeps_exclusions(api):
    ws = api.agent.workspace
    TurnFactory(workspace=ws, content="postgres backup done")
    kept = TurnFactory(workspace=ws, content="the migration ran overnight")
    body = api.get("/api/v1/conversations/search/", {"q": "migration postgres -backup"}).json()
    assert [r["id"] for r in body["results"]] == [kept.pk]


def test_search_is_paginated_and_filtered(api):
    ws = api.agent.workspace
    for i in range(5):
        TurnFactory(workspace=ws, session_id="a", content=f"deploy attempt {i}")
    TurnFactory(workspace=ws, session_id="b", content="deploy elsewhere")
    page = api.get("/api/v1/conversations/search/", {"q": "deploy", "limit": 2}).json()
    assert (page["count"], len(page["results"]), page["next_offset"]) == (6, 2, 2)
    scoped = api.get("/api/v1/conversations/search/", {"q": "deploy", "session_id": "b"}).json()
    assert [r["session_id"] for r in scoped["results"]] == ["b"]


@pytest.mark.parametrize("params", [{}, {"q": ""}, {"q": "x", "limit": 500}])
def test_search_validation_errors_are_400s(api, params):
    assert api.get("/api/v1/conversations/search/", params).status_code == 400


def test_search_never_shows_another_workspaces_turns(api, make_api):
    TurnFactory(workspace=api.agent.workspace, content="our roadmap for the quarter")
    other = make_api()
    body = other.get("/api/v1/conversations/search/", {"q": "roadmap"}).json()
    assert body["count"] == 0 and body["results"] == []
    assert other.get("/api/v1/sessions/session-1/turns/").json()["count"] == 0
