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
    TurnFactory(workspace=ws, session_id="other", content="Lunch at noon")
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


# --------------------------------------------------------------------------- batch turns


def _turns(n, start=0, prefix="turn"):
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"{prefix} {i} about the garden",
            "turn_index": i,
            "at": f"2023-05-08T13:{i % 60:02d}:00Z",
        }
        for i in range(start, start + n)
    ]


def test_a_batch_of_turns_is_stored_in_one_call_and_a_retry_is_a_200(api):
    url = "/api/v1/sessions/s1/turns/"
    response = api.post(url, {"turns": _turns(500)}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["created"], body["existing"], len(body["turns"])) == (500, 0, 500)
    assert ConversationTurn.objects.filter(session_id="s1").count() == 500
    first = ConversationTurn.objects.get(session_id="s1", turn_index=0)
    assert first.created_at.isoformat().startswith("2023-05-08T13:00")
    again = api.post(url, {"turns": _turns(500)}, format="json")
    assert again.status_code == 200
    assert (again.json()["created"], again.json()["existing"]) == (0, 500)
    assert [t["id"] for t in again.json()["turns"]] == [t["id"] for t in body["turns"]]
    more = api.post(url, {"turns": _turns(3, start=499)}, format="json").json()
    assert (more["created"], more["existing"]) == (2, 1)
    assert ConversationTurn.objects.filter(session_id="s1").count() == 502


def test_a_batch_is_all_or_nothing_and_names_the_turn(api):
    url = "/api/v1/sessions/s1/turns/"
    api.post(url, {"turns": _turns(2)}, format="json")
    conflict = api.post(url, {"turns": _turns(4, prefix="other")}, format="json")
    assert conflict.status_code == 409
    assert "turns[0].turn_index" in conflict.json()["error"]["fields"]
    assert ConversationTurn.objects.count() == 2
    bad = _turns(3, start=10)
    bad[2]["content"] = "password=" + "hunter22"
    refused = api.post(url, {"turns": bad}, format="json")
    assert refused.status_code == 422
    assert list(refused.json()["error"]["fields"]) == ["turns[2].content"]
    missing = _turns(3, start=10)
    del missing[1]["role"]
    assert api.post(url, {"turns": missing}, format="json").status_code == 400
    too_many = api.post(url, {"turns": _turns(501, start=10)}, format="json")
    assert too_many.status_code == 400 and "turns" in too_many.json()["error"]["fields"]
    assert ConversationTurn.objects.count() == 2


def test_an_incognito_batch_records_nothing(api):
    response = api.post(
        "/api/v1/sessions/s1/turns/", {"turns": _turns(3), "incognito": True}, format="json"
    )
    assert response.status_code == 202 and response.json() == {"recorded": False}
    assert not ConversationTurn.objects.exists()
