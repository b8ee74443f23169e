"""Questions about time (issue 54): ``as_of`` on /recall/ and /conversations/search/,
the soft window it gives, returned with the results, and each turn's and item's
own time."""

from __future__ import annotations

import pytest

from tests.memory.knowledge.test_turn_search import SEARCH, _store

pytestmark = pytest.mark.django_db

RECALL = "/api/v1/recall/"
AS_OF = "2023-05-30T18:00:00Z"  # a Tuesday


def _two_dinners(api):
    """The same words said twice: on Sunday 28 May and on Monday 15 May 2023."""
    recent = _store(
        api, "s-recent", ["I cooked mushroom risotto for my friend Ana."], at="2023-05-28T19:00:00Z"
    )[0]
    older = _store(
        api, "s-older", ["I cooked mushroom risotto for my friend Ana."], at="2023-05-15T19:00:00Z"
    )[0]
    return recent, older


def test_a_couple_of_days_ago_lifts_what_was_said_then_and_filters_nothing(api, settings):
    recent, older = _two_dinners(api)
    q = "what did I cook for my friend a couple of days ago?"
    body = api.get(SEARCH, {"q": q, "as_of": AS_OF}).json()
    ids = [r["id"] for r in body["results"]]
    assert ids[:2] == [recent, older]  # the older one is still there, below
    assert body["time_window"] == {
        "expression": "a couple of days ago",
        "start": "2023-05-27T00:00:00Z",
        "end": "2023-05-30T00:00:00Z",
        "as_of": AS_OF,
    }
    # Asked two weeks earlier, the same words point at the other dinner.
    body = api.get(SEARCH, {"q": q, "as_of": "2023-05-17T09:00:00Z"}).json()
    assert [r["id"] for r in body["results"]][:2] == [older, recent]
    # Without the lift the two are level, and the newer wins the tie either way.
    settings.CAIRN_TURN_TIME_BOOST = 0.0
    body = api.get(SEARCH, {"q": q, "as_of": "2023-05-17T09:00:00Z"}).json()
    assert [r["id"] for r in body["results"]][:2] == [recent, older]
    assert body["time_window"]["expression"] == "a couple of days ago"  # still read


def test_recall_reads_as_of_for_turns_and_knowledge_items(api):
    recent_turn, older_turn = _two_dinners(api)
    items = []
    for observed in ("2023-05-15T20:00:00Z", "2023-05-28T20:00:00Z"):
        response = api.post(
            "/api/v1/knowledge/",
            {
                "content": f"Cooked mushroom risotto for Ana on {observed[:10]}",
                "observed_at": observed,
            },
            format="json",
        )
        assert response.status_code == 201, response.content
        items.append(response.json()["id"])
    q = "what did I cook for my friend 2 weeks ago?"
    body = {"query": q, "sources": "both", "top_k": 4, "as_of": AS_OF}
    body = api.post(RECALL, body, format="json").json()
    assert body["time_window"]["expression"] == "2 weeks ago"
    assert body["time_window"]["start"] == "2023-05-12T00:00:00Z"
    order = [(r["kind"], r["id"]) for r in body["results"]]
    # Of each kind, what was said or observed about 15 May comes first; nothing is left out.
    assert [i for kind, i in order if kind == "turn"] == [older_turn, recent_turn]
    assert [i for kind, i in order if kind == "knowledge"] == items
    scores = [r["score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True)
    # Without the words about time, the newer item and turn lead (same words, newer first).
    body = {"query": "what did I cook for my friend?", "sources": "both", "top_k": 4}
    body = api.post(RECALL, {**body, "as_of": AS_OF}, format="json").json()
    assert body["time_window"] is None
    order = [(r["kind"], r["id"]) for r in body["results"]]
    assert [i for kind, i in order if kind == "turn"] == [recent_turn, older_turn]


def test_no_time_words_no_window_and_the_default_as_of_is_now(api):
    _two_dinners(api)
    body = api.get(SEARCH, {"q": "mushroom risotto"}).json()
    assert body["time_window"] is None
    body = {"query": "risotto yesterday", "sources": "turns"}
    body = api.post(RECALL, body, format="json").json()
    assert body["time_window"]["expression"] == "yesterday"
    assert body["time_window"]["end"] > "2026"  # read against the server's clock


@pytest.mark.parametrize(
    "bad", ["yesterday", "2023-13-01", "12345678901234567890", "2023-05-30T25:00"]
)
def test_a_bad_as_of_is_a_400_naming_the_field(api, bad):
    response = api.get(SEARCH, {"q": "risotto", "as_of": bad})
    assert response.status_code == 400
    assert "as_of" in response.json()["error"]["fields"]
    response = api.post(RECALL, {"query": "risotto", "as_of": bad}, format="json")
    assert response.status_code == 400
    assert "as_of" in response.json()["error"]["fields"]
