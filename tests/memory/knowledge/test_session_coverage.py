"""group=session lifts a session by the share of the question it says somewhere:
``sessions_coverage`` (idf-weighted, within the search's scope) and its weight,
CAIRN_TURN_SESSION_COVERAGE, through the API."""

from __future__ import annotations

import pytest
from django.db import connection

from memory.knowledge import recall, turn_search
from memory.knowledge.turn_search import sessions_coverage
from tests.factories.knowledge import BrokenEmbedder
from tests.memory.knowledge.test_turn_search import SEARCH, _store

pytestmark = pytest.mark.django_db


def _sessions(api, q, **params):
    body = api.get(SEARCH, {"q": q, "group": "session", **params}).json()
    return {s["session_id"]: s["score"] for s in body["sessions"]}, [
        s["session_id"] for s in body["sessions"]
    ]


def test_a_session_that_says_the_whole_question_outranks_one_that_repeats_part_of_it(api, settings):
    # "named" answers the question across two turns (the shelter puppy, then her name);
    # "repeats" talks about shelter puppies more, so its turns alone rank it first.
    _store(api, "named", ["I adopted a puppy from the shelter.", "Her name is Pixie, so cute."])
    _store(
        api,
        "repeats",
        ["The shelter puppy was adorable.", "We looked at puppies at the shelter again, so many."],
    )
    _store(api, "unrelated", ["Lunch at noon with my sister.", "The weather was lovely."])
    question = "what is the name of the shelter puppy"

    settings.CAIRN_TURN_SESSION_COVERAGE = 0.0
    turns_only, order = _sessions(api, question)
    assert order[:2] == ["repeats", "named"]

    settings.CAIRN_TURN_SESSION_COVERAGE = 0.5
    lifted, order = _sessions(api, question)
    assert order[:2] == ["named", "repeats"]
    # "named" says every word of the question (name, shelter, puppy): lifted by the whole
    # weight; "repeats" never says "name": lifted by less.
    assert lifted["named"] - turns_only["named"] == pytest.approx(0.5)
    assert 0 < lifted["repeats"] - turns_only["repeats"] < 0.5


def test_coverage_weighs_rare_words_more_and_keeps_to_the_search_scope(api, make_api):
    _store(api, "all", ["I bought a red racket.", "We played tennis after work."])
    _store(api, "rare", ["My red scarf is warm."])
    _store(api, "common", ["Tennis on TV again.", "Tennis is on every channel tonight."])
    _store(api, "none", ["Lunch at noon."])
    _store(api, "elsewhere", ["A red racket for tennis."], context="work")
    other = make_api()
    _store(other, "none", ["A red racket for tennis, in another workspace."])
    workspace = api.agent.workspace

    def coverage(q, **scope):
        ids = ["all", "rare", "common", "none", "elsewhere"]
        return sessions_coverage(workspace=workspace, query=q, session_ids=ids, **scope)

    share = coverage("red racket tennis")
    assert share["all"] == pytest.approx(1.0)
    assert share["elsewhere"] == pytest.approx(1.0)
    assert share["none"] == 0.0  # the other workspace's "none" says every word
    # "red" is in 3 turns of 7, "tennis" in 4: the session saying only "red" covers more.
    assert 0 < share["common"] < share["rare"] < 1
    assert share["rare"] + share["common"] < 1  # "racket" counts too

    # Scoped to a context, a session's turns elsewhere say nothing.
    assert coverage("red racket tennis", context="work")["all"] == 0.0
    # A -word: turns holding it do not count (the tennis turn of "all" says "work").
    excluded = coverage("red racket tennis -work")
    assert 0 < excluded["all"] < 1
    assert excluded["rare"] > 0
    # Nothing to look for: no lift.
    assert set(coverage("the of and").values()) == {0.0}


# --------------------------------------------------------------------------- plans


def _plans(marker: str) -> tuple[int, int]:
    """(generic, custom) plans of this connection's prepared statements holding ``marker``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) "
            "FROM pg_prepared_statements WHERE statement LIKE %s",
            [f"%{marker}%"],
        )
        generic, custom = cursor.fetchone()
    return int(generic), int(custom)


def _generic_plans_by_default() -> None:
    """Every prepared statement of this connection generic, unless its transaction says
    not. The test's transaction ends in a rollback, which undoes this SET; a search's
    SET LOCAL lasts to the end of that outer transaction, so each part sets it anew."""
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")


def test_search_statements_are_planned_for_their_own_values_every_time(api, monkeypatch):
    # Prepared on the server (CAIRN_DB_PREPARE), PostgreSQL would switch a statement to
    # a generic plan after five runs; the coverage statement's took 250 ms where its own
    # plan takes 20-60 on 100,000 turns. Full-text-only searches (the embedder down)
    # have no vector settings to carry the plan mode, so they set it themselves.
    _store(api, "a", ["I adopted a puppy from the shelter.", "Her name is Pixie."])
    _store(api, "b", ["The shelter puppy was adorable."])
    workspace = api.agent.workspace
    _generic_plans_by_default()
    for i in range(8):
        sessions_coverage(
            workspace=workspace, query=f"shelter puppy name {i}", session_ids=["a", "b"]
        )
    generic, custom = _plans("held AS (")
    assert generic == 0 and custom >= 6  # prepared from its third run

    _generic_plans_by_default()
    monkeypatch.setattr(turn_search, "get_embedder", lambda: BrokenEmbedder())
    for i in range(8):
        body = api.get(SEARCH, {"q": f"shelter puppy {i}"}).json()
        assert body["results"][0]["session_id"] in {"a", "b"}
    generic, custom = _plans("asking AS MATERIALIZED")
    assert generic == 0 and custom >= 6

    # Knowledge recall on full text alone, the same way.
    api.post(
        "/api/v1/knowledge/",
        {"content": "The shelter puppy is called Pixie", "category": "fact"},
        format="json",
    )
    _generic_plans_by_default()
    monkeypatch.setattr(recall, "get_embedder", lambda: BrokenEmbedder())
    for i in range(8):
        body = api.post("/api/v1/recall/", {"query": f"shelter puppy {i}"}, format="json").json()
        assert body["results"], body
    generic, custom = _plans("fused AS (")
    assert generic == 0 and custom >= 6
