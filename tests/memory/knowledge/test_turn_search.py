"""Conversation turns as first-class memory: contextual vectors, hybrid search,
sessions and neighbours, recall over turns, the optional reranker."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.db import connection

from memory.backfill import embed_backfill_pending, embed_backfill_run
from memory.core.embeddings import get_embedder
from memory.knowledge import turn_text
from memory.knowledge.answer_kind import answer_kind
from memory.knowledge.turn_search import TurnHit, session_score, turns_group_sessions
from memory.knowledge.turn_text import turn_embedding_text
from memory.models import ConversationTurn
from tests.factories.knowledge import BrokenEmbedder

pytestmark = pytest.mark.django_db

SEARCH = "/api/v1/conversations/search/"


def _store(api, session_id, contents, *, start=0, at="2023-05-08T13:00:00Z", context=None):
    turns = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": text,
            "turn_index": start + i,
            "at": at,
            **({"context": context} if context else {}),
        }
        for i, text in enumerate(contents)
    ]
    response = api.post(f"/api/v1/sessions/{session_id}/turns/", {"turns": turns}, format="json")
    assert response.status_code == 201, response.content
    return [row["id"] for row in response.json()["turns"]]


# --------------------------------------------------------------------------- vectors


def test_the_embedded_text_is_the_turn_then_the_start_of_the_turn_before():
    at = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
    before = "Been to Paris? " + "We loved the museums and the long walks by the river. " * 8

    def text(mode, previous=before):
        return turn_embedding_text(
            content="Yes,  twice!", role="user", at=at, previous=previous, mode=mode
        )

    assert text("previous") == (
        "Yes, twice! (Been to Paris? We loved the museums and the long walks by the river. "
        "We loved t…)"
    )
    assert len(text("previous")) == len("Yes, twice! ()") + 80
    assert len(text("previous100")) == len("Yes, twice! ()") + 100
    assert text("window") == text("previous")  # its text where no token states are given
    assert text("previous", previous=None) == "Yes, twice!"
    full = text("full")
    assert full.startswith("Yes, twice!\n(user, 8 May 2023; replying to: Been to Paris? We")
    assert (
        full.endswith("…)")
        and len(full) == len("Yes, twice!\n(user, 8 May 2023; replying to: )") + 300
    )
    assert text("date") == "Yes, twice!\n(user, 8 May 2023)"
    assert text("none") == "Yes, twice!"


def test_turns_get_vectors_at_store_time_one_by_one_and_in_batches(api, settings):
    settings.CAIRN_TURN_EMBED_CONTEXT = "previous"  # test_turn_windows.py: the default
    response = api.post(
        "/api/v1/sessions/s1/turns/",
        {"role": "user", "content": "Have you been to Paris?", "turn_index": 0},
        format="json",
    )
    assert response.status_code == 201
    ids = _store(api, "s1", ["Yes, twice last year!", "What did you like?"], start=1)
    model = get_embedder().model_id
    rows = ConversationTurn.objects.filter(pk__in=[response.json()["id"], *ids])
    assert {(r.embedding is not None, r.embedding_model) for r in rows} == {(True, model)}
    # The reply was embedded in the context of the question before it (stored earlier).
    reply = ConversationTurn.objects.get(pk=ids[0])
    expected = get_embedder().embed_one(
        turn_embedding_text(
            content="Yes, twice last year!",
            role="user",
            at=reply.created_at,
            previous="Have you been to Paris?",
        )
    )
    assert list(reply.embedding) == pytest.approx(expected, abs=1e-5)


def test_an_embedder_failure_keeps_the_turn_and_the_backfill_embeds_it(api, monkeypatch, settings):
    settings.CAIRN_TURN_EMBED_CONTEXT = "previous"
    monkeypatch.setattr(turn_text, "get_embedder", lambda: BrokenEmbedder())
    ids = _store(api, "s2", ["I moved to Lisbon in March.", "How is the weather?"])
    response = api.post(
        "/api/v1/sessions/s2/turns/",
        {"role": "user", "content": "Sunny, mostly.", "turn_index": 2},
        format="json",
    )
    assert response.status_code == 201
    ids.append(response.json()["id"])
    assert ConversationTurn.objects.filter(pk__in=ids, embedding__isnull=True).count() == 3
    monkeypatch.undo()
    assert embed_backfill_pending()["turns"] == 3
    counts = embed_backfill_run(batch_size=2)
    assert counts["turns"] == 3
    assert embed_backfill_pending()["turns"] == 0
    last = ConversationTurn.objects.get(pk=ids[2])
    assert last.embedding_model == get_embedder().model_id
    expected = get_embedder().embed_one(
        turn_embedding_text(
            content="Sunny, mostly.",
            role="user",
            at=last.created_at,
            previous="How is the weather?",
        )
    )
    assert list(last.embedding) == pytest.approx(expected, abs=1e-5)


def _own(text):
    return get_embedder().embed_one(text)


def _carried(own, before):
    mixed = [a + turn_text.CARRY_WEIGHT["running"] * b for a, b in zip(own, before, strict=True)]
    norm = sum(x * x for x in mixed) ** 0.5
    return [x / norm for x in mixed]


def _vector(pk):
    return list(ConversationTurn.objects.get(pk=pk).embedding)


def test_running_carries_the_stored_vector_of_the_turn_before_one_by_one_and_in_batches(
    api, settings
):
    settings.CAIRN_TURN_EMBED_CONTEXT = "running"
    first = _store(api, "r1", ["Have you been to Paris?"])[0]
    # Batch out of order: each turn still carries the one before it by turn_index.
    turns = [
        {"role": "assistant", "content": "What did you like?", "turn_index": 2},
        {"role": "user", "content": "Yes, twice last year!", "turn_index": 1},
    ]
    response = api.post("/api/v1/sessions/r1/turns/", {"turns": turns}, format="json")
    assert response.status_code == 201, response.content
    liked, twice = (row["id"] for row in response.json()["turns"])
    single = api.post(
        "/api/v1/sessions/r1/turns/",
        {"role": "user", "content": "The museums.", "turn_index": 3},
        format="json",
    ).json()["id"]

    assert _vector(first) == pytest.approx(_own("Have you been to Paris?"), abs=1e-5)
    expected_twice = _carried(_own("Yes, twice last year!"), _vector(first))
    assert _vector(twice) == pytest.approx(expected_twice, abs=1e-5)
    expected_liked = _carried(_own("What did you like?"), _vector(twice))
    assert _vector(liked) == pytest.approx(expected_liked, abs=1e-5)
    assert _vector(single) == pytest.approx(
        _carried(_own("The museums."), _vector(liked)), abs=1e-5
    )
    # The context made the reply nearer the question it answers than its own text is.
    question = _own("Have you been to Paris?")
    cosine = lambda v: sum(a * b for a, b in zip(v, question, strict=True))  # noqa: E731
    assert cosine(_vector(twice)) > cosine(_own("Yes, twice last year!")) + 0.05


def test_running_carries_nothing_from_a_turn_embedded_by_another_model(api, settings):
    settings.CAIRN_TURN_EMBED_CONTEXT = "running"
    first = _store(api, "r2", ["Have you been to Paris?"])[0]
    ConversationTurn.objects.filter(pk=first).update(embedding_model="another-model")
    reply = _store(api, "r2", ["Yes, twice last year!"], start=1)[0]
    assert _vector(reply) == pytest.approx(_own("Yes, twice last year!"), abs=1e-5)


def test_running_backfill_chains_the_turns_it_embeds(api, monkeypatch, settings):
    settings.CAIRN_TURN_EMBED_CONTEXT = "running"
    first = _store(api, "r3", ["I moved to Lisbon in March."])[0]
    monkeypatch.setattr(turn_text, "get_embedder", lambda: BrokenEmbedder())
    ids = _store(api, "r3", ["How is the weather?", "Sunny, mostly.", "Lucky you."], start=1)
    monkeypatch.undo()
    assert embed_backfill_run(batch_size=2)["turns"] == 3  # one chain across two batches
    expected = _vector(first)
    for pk, text in zip(ids, ["How is the weather?", "Sunny, mostly.", "Lucky you."], strict=True):
        expected = _carried(_own(text), expected)
        assert _vector(pk) == pytest.approx(expected, abs=1e-5)


# --------------------------------------------------------------------------- search


def test_search_finds_a_paraphrase_that_shares_no_word(api):
    _store(api, "cooking", ["I made lasagna for dinner", "The oven broke halfway through"])
    target = _store(api, "pets", ["My golden retriever loves to swim in the lake"])[0]
    _store(api, "work", ["The quarterly budget review is on Friday"])
    body = api.get(SEARCH, {"q": "which dog enjoys water?"}).json()
    assert body["mode"] == "any"
    assert body["results"][0]["id"] == target
    hit = body["results"][0]
    assert hit["vector_rank"] == 1 and hit["text_rank"] is None


def test_group_session_ranks_sessions_with_their_best_turns(api):
    _store(api, "trip", ["We booked the flights to Tokyo", "The hotel in Tokyo is near Shibuya"])
    _store(api, "garden", ["The tomatoes are finally ripe", "Tokyo is far away"])
    _store(api, "office", ["Printer is jammed again"])
    body = api.get(SEARCH, {"q": "Tokyo hotel flights", "group": "session", "limit": 2}).json()
    assert [s["session_id"] for s in body["sessions"]] == ["trip", "garden"]
    assert body["count"] >= 2 and body["limit"] == 2
    trip = body["sessions"][0]
    assert trip["matches"] == 2 and len(trip["turns"]) == 2
    assert trip["score"] >= body["sessions"][1]["score"]
    assert {r["session_id"] for r in body["results"]} == {"trip", "garden"}


def _hit(session_id, relevance, index=0):
    return TurnHit(
        id=index, session_id=session_id, role="user", turn_index=index, context="global",
        created_at=datetime(2023, 5, 8, tzinfo=UTC), content="", vector_rank=None,
        text_rank=None, relevance=relevance,
    )  # fmt: skip


def _ranked(*sessions):
    hits = [_hit(name, r, i) for name, rels in sessions for i, r in enumerate(rels)]
    return [s.session_id for s in turns_group_sessions(hits)]


def test_a_session_scores_a_soft_maximum_of_its_turns(settings):
    settings.CAIRN_TURN_SESSION_TEMPERATURE = 0.2
    # Several turns as good beat one slightly better turn ...
    assert _ranked(("lucky", [1.0]), ("several", [0.9, 0.9, 0.9])) == ["several", "lucky"]
    # ... but a weak second turn does not lift a weaker best turn past a better one.
    assert _ranked(("best", [1.0]), ("tail", [0.9, 0.5])) == ["best", "tail"]
    settings.CAIRN_TURN_SESSION_TEMPERATURE = 0.0  # the earlier rule: best + 0.3 second
    assert _ranked(("best", [1.0]), ("tail", [0.9, 0.5])) == ["tail", "best"]
    assert session_score([0.5, 2.0]) == pytest.approx(2.15)


def test_neighbours_brings_the_turns_around_each_hit(api):
    _store(
        api,
        "s",
        [
            "Good morning!",
            "What is the wifi password at the cabin?",
            "It is written on the fridge.",
            "Thanks, see you later.",
        ],
    )
    body = api.get(SEARCH, {"q": "cabin wifi password", "neighbours": 1, "limit": 1}).json()
    hit = body["results"][0]
    assert hit["turn_index"] == 1
    assert [n["turn_index"] for n in hit["neighbours"]] == [0, 2]
    assert hit["neighbours"][1]["content"] == "It is written on the fridge."
    plain = api.get(SEARCH, {"q": "cabin wifi password", "limit": 1}).json()["results"][0]
    assert "neighbours" not in plain


def test_a_walk_cut_short_by_other_workspaces_turns_is_answered_exactly(api, make_api, settings):
    """The vector walk stops at CAIRN_RECALL_MAX_SCAN_TUPLES index entries, here
    mostly another workspace's turns; what it missed of this one's is read exactly."""
    settings.CAIRN_RECALL_MAX_SCAN_TUPLES = 60
    settings.CAIRN_RECALL_EF_SEARCH = 10  # the walk's first pass: the candidate count
    settings.CAIRN_RECALL_EXACT_BELOW = 0  # walk the index, as for a large workspace
    other = make_api().agent.workspace
    texts = [f"Note {i}: we ate pasta for dinner" for i in range(200)]
    embedder = get_embedder()
    vectors = embedder.embed(texts) * 10
    ConversationTurn.objects.bulk_create(
        ConversationTurn(
            workspace=other,
            session_id=f"o{i // 100}",
            role="user",
            turn_index=i % 100,
            content=texts[i % len(texts)],
            embedding=vector,
            embedding_model=embedder.model_id,
        )
        for i, vector in enumerate(vectors)
    )
    mine = _store(
        api,
        "mine",
        [
            "I cooked a mushroom risotto last night",
            "Supper was sushi with my sister",
            "We grilled salmon in the evening",
            "Tonight's meal: lentil soup and bread",
            "My partner baked a pizza for us",
            "We had tacos around eight",
        ],
    )
    with connection.cursor() as cursor:
        # The plan a large table gets (walk the index, no sort). Ends with the test.
        cursor.execute("SET LOCAL enable_sort = off")
    body = api.get(SEARCH, {"q": "what did we eat for dinner?", "limit": 10}).json()
    assert {r["id"] for r in body["results"]} == set(mine)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"q": "x", "group": "day"}, "group"),
        ({"q": "x", "neighbours": 4}, "neighbours"),
        ({"q": "x", "neighbours": -1}, "neighbours"),
    ],
)
def test_bad_search_parameters_are_400s_naming_them(api, params, field):
    response = api.get(SEARCH, params)
    assert response.status_code == 400
    assert field in json.dumps(response.json())


def test_search_and_recall_never_show_another_workspaces_turns(api, make_api):
    _store(api, "s", ["Our secret roadmap is to launch the glider in June"])
    other = make_api()
    body = other.get(SEARCH, {"q": "glider launch roadmap"}).json()
    assert body["results"] == [] and body["count"] == 0
    recalled = other.post(
        "/api/v1/recall/", {"query": "glider launch", "sources": "turns"}, format="json"
    ).json()
    assert recalled["results"] == []


# --------------------------------------------------------------------------- recall


def test_recall_sources_both_merges_knowledge_and_turns_with_their_kind(api):
    item = api.post(
        "/api/v1/knowledge/",
        {"content": "Sarah prefers meetings before 10am", "category": "preference"},
        format="json",
    ).json()["id"]
    turn = _store(api, "s", ["Sarah said she likes early meetings, before ten"])[0]
    default = api.post(
        "/api/v1/recall/", {"query": "when does Sarah like meetings?"}, format="json"
    )
    assert [(h["kind"], h["id"]) for h in default.json()["results"]] == [("knowledge", item)]
    both = api.post(
        "/api/v1/recall/",
        {"query": "when does Sarah like meetings?", "sources": "both", "top_k": 5},
        format="json",
    ).json()["results"]
    kinds = {(h["kind"], h["id"]) for h in both}
    assert kinds == {("knowledge", item), ("turn", turn)}
    turn_hit = next(h for h in both if h["kind"] == "turn")
    assert turn_hit["source"] == "turn" and turn_hit["session_id"] == "s"
    assert [h["score"] for h in both] == sorted((h["score"] for h in both), reverse=True)
    only_turns = api.post(
        "/api/v1/recall/",
        {"query": "when does Sarah like meetings?", "sources": "turns"},
        format="json",
    ).json()["results"]
    assert [h["id"] for h in only_turns] == [turn]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x", "sources": "everything"}, "sources"),
        ({"query": "x", "sources": "turns", "category": "fact"}, "category"),
        ({"query": "x", "sources": "both", "entity": "person:sarah"}, "entity"),
    ],
)
def test_bad_recall_sources_are_400s_naming_the_field(api, body, field):
    response = api.post("/api/v1/recall/", body, format="json")
    assert response.status_code == 400
    assert field in json.dumps(response.json())


# --------------------------------------------------------------------------- reranker


class _Reranker(BaseHTTPRequestHandler):
    fail = False
    seen: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append((self.path, body))
        if type(self).fail:
            self.send_response(500)
            self.end_headers()
            return
        # Prefers documents mentioning "fridge", whatever the fused order says.
        results = [
            {"index": i, "relevance_score": 1.0 if "fridge" in doc else 0.1}
            for i, doc in enumerate(body["documents"])
        ]
        payload = json.dumps({"results": results}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def reranker(settings):
    server = HTTPServer(("127.0.0.1", 0), _Reranker)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Reranker.fail, _Reranker.seen = False, []
    _Reranker.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    settings.CAIRN_RERANK_URL = _Reranker.url
    settings.CAIRN_RERANK_MODEL = "tiny-reranker"
    yield _Reranker
    server.shutdown()
    server.server_close()


def test_a_configured_reranker_reorders_the_fused_candidates(api, reranker):
    _store(api, "s", ["Where is the wifi password?", "The wifi password is on the fridge"])
    body = api.get(SEARCH, {"q": "where is the wifi password", "limit": 2}).json()
    assert body["results"][0]["snippet"].lower().count("fridge") == 1
    path, request = reranker.seen[0]
    assert path == "/v1/rerank" and request["model"] == "tiny-reranker"
    assert request["query"] and len(request["documents"]) == 2


def test_a_failing_reranker_leaves_the_fused_order(api, reranker, settings):
    _store(api, "s", ["Where is the wifi password?", "The wifi password is on the fridge"])
    settings.CAIRN_RERANK_URL = ""
    fused = [
        r["id"] for r in api.get(SEARCH, {"q": "where is the wifi password"}).json()["results"]
    ]
    settings.CAIRN_RERANK_URL = "http://127.0.0.1:9/v1"  # nothing listens there
    down = [r["id"] for r in api.get(SEARCH, {"q": "where is the wifi password"}).json()["results"]]
    assert down == fused
    reranker.fail = True  # the local server answers 500
    settings.CAIRN_RERANK_URL = reranker.url
    failed = api.get(SEARCH, {"q": "where is the wifi password"}).json()["results"]
    assert [r["id"] for r in failed] == fused and reranker.seen


def test_a_period_named_in_the_query_lifts_the_turns_said_then(api, settings):
    settings.CAIRN_TURN_TIME_BOOST = 0.3
    august = _store(api, "aug", ["We went hiking in the Alps"], at="2023-08-20T10:00:00Z")[0]
    may = _store(api, "may", ["We went hiking in the Alps"], at="2023-05-20T10:00:00Z")[0]
    ids = [r["id"] for r in api.get(SEARCH, {"q": "hiking in May 2023"}).json()["results"]]
    assert ids == [may, august]
    ids = [r["id"] for r in api.get(SEARCH, {"q": "hiking in August 2023"}).json()["results"]]
    assert ids == [august, may]


# --------------------------------------------------------------------------- asking and answering


@pytest.mark.parametrize(
    "question, kind",
    [
        ("When did Calvin first travel to Tokyo?", "time"),
        ("What year did Maria start volunteering?", "time"),
        ("How long ago was Caroline's 18th birthday?", "time"),
        ("How many children does Melanie have?", "number"),
        ("For how long has Nate had his turtles?", "number"),
        ("What did Nate feel when he went out?", None),
        ("Who supports Caroline?", None),
    ],
)
def test_the_kind_of_answer_a_question_asks_for(question, kind):
    assert answer_kind(question) == kind


def _relevance(api, q, turn_id, **params):
    results = api.get(SEARCH, {"q": q, **params}).json()["results"]
    return next((r["rank"] for r in results if r["id"] == turn_id), 0.0)


@pytest.mark.parametrize("fusion, independent", [("score", True), ("minmax", False)])
def test_a_turns_score_does_not_depend_on_how_many_candidates_were_taken(
    api, settings, fusion, independent
):
    """Score fusion gives every candidate both of its scores, scaled against fixed
    ends, so taking 4 or 100 candidates per list changes no turn's relevance; the
    earlier min-max fusion scaled over the candidates taken (and is kept to show it)."""
    _store(
        api,
        "s",
        [
            "We hiked up the mountain trail at dawn",
            "The mountain hut served hot soup",
            "My knee hurt after the long hike",
            "I bought new hiking boots on sale",
            "The weather forecast says snow on the peaks",
            "We took photos of the valley below",
            "Dinner was pasta with mushrooms",
            "The train back was delayed an hour",
            "I want to climb a higher mountain next summer",
            "My sister lent me her trekking poles",
        ],
    )
    settings.CAIRN_TURN_FUSION = fusion
    q = "mountain hike boots"
    settings.CAIRN_TURN_CANDIDATE_MIN = 3  # three per list: the page of 3 is all ranked there
    few = {r["id"]: r["rank"] for r in api.get(SEARCH, {"q": q, "limit": 3}).json()["results"]}
    settings.CAIRN_TURN_CANDIDATE_MIN = 100
    many = {r["id"]: r["rank"] for r in api.get(SEARCH, {"q": q, "limit": 10}).json()["results"]}
    assert len(few) == 3 and len(many) > 5  # the unrelated ones are below the similarity floor
    same = [many.get(i) == pytest.approx(rank, rel=1e-9) for i, rank in few.items()]
    assert all(same) if independent else not all(same)


def test_a_turn_that_asks_passes_part_of_its_relevance_to_its_reply(api, settings):
    asks, reply = _store(
        api, "s", ["What is your favourite board game?", "Definitely chess, every weekend."]
    )
    _store(api, "other", ["Cooking pasta tonight.", "Sounds tasty."])
    q = "favourite board game"
    settings.CAIRN_TURN_QUESTION_PENALTY, settings.CAIRN_TURN_QUESTION_CREDIT = 0.0, 0.0
    settings.CAIRN_TURN_BEFORE_CREDIT = 0.0
    asks_alone, reply_alone = _relevance(api, q, asks), _relevance(api, q, reply)
    settings.CAIRN_TURN_QUESTION_PENALTY, settings.CAIRN_TURN_QUESTION_CREDIT = 0.5, 0.5
    assert _relevance(api, q, asks) == pytest.approx(asks_alone * 0.5, rel=1e-6)
    assert _relevance(api, q, reply) == pytest.approx(reply_alone + asks_alone * 0.5, rel=1e-6)


def test_a_turn_that_does_not_ask_passes_nothing_to_the_next_but_credits_the_one_before(
    api, settings
):
    before, said = _store(api, "s", ["Guess what happened.", "I adopted a puppy named Rex."])
    q = "adopted puppy Rex"
    settings.CAIRN_TURN_ENTITY_BOOST = 0.0  # the credit is a share of the fused relevance
    settings.CAIRN_TURN_QUESTION_CREDIT, settings.CAIRN_TURN_BEFORE_CREDIT = 0.5, 0.0
    said_alone, before_alone = _relevance(api, q, said), _relevance(api, q, before)
    settings.CAIRN_TURN_BEFORE_CREDIT = 0.25
    assert _relevance(api, q, said) == pytest.approx(said_alone, rel=1e-6)
    assert _relevance(api, q, before) == pytest.approx(before_alone + said_alone * 0.25, rel=1e-6)


def test_a_when_question_lifts_the_turn_that_says_when(api, settings):
    settings.CAIRN_TURN_ANSWER_BOOST = 0.3
    when, who, often = _store(
        api,
        "alps",
        [
            "We went hiking in the Alps last summer [shares a photo: a lake]",
            "We went hiking in the Alps with Sam and Kim",
            "We went hiking in the Alps three times",
        ],
    )
    ids = [
        r["id"]
        for r in api.get(SEARCH, {"q": "When did we go hiking in the Alps?"}).json()["results"]
    ]
    assert ids[0] == when
    ids = [
        r["id"]
        for r in api.get(SEARCH, {"q": "How often did we hike in the Alps?"}).json()["results"]
    ]
    assert ids[0] == often
    settings.CAIRN_TURN_ANSWER_BOOST = 0.0
    lifted = _relevance(api, "When did we go hiking in the Alps?", when)
    settings.CAIRN_TURN_ANSWER_BOOST = 0.3
    assert _relevance(api, "When did we go hiking in the Alps?", when) == pytest.approx(
        lifted + 0.3, rel=1e-6
    )
    assert who in [r["id"] for r in api.get(SEARCH, {"q": "Who hiked the Alps?"}).json()["results"]]
