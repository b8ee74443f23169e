"""CAIRN_TURN_EMBED_CONTEXT=window: a session's turns read together in windows, each
turn's vector pooled from its own tokens (memory/core/windows.py)."""

from __future__ import annotations

import numpy as np
import pytest

from memory.backfill import embed_backfill_run
from memory.core.embeddings import get_embedder
from memory.core.local_embedder import MAX_TOKENS
from memory.core.openai_embedder import OpenAIEmbedder
from memory.core.windows import WINDOW_TOKENS, embed_sequences
from memory.knowledge import turn_text
from memory.models import ConversationTurn
from tests.factories.knowledge import BrokenEmbedder

pytestmark = pytest.mark.django_db

QUESTION, REPLY = "Have you been to Paris?", "Yes, twice last year!"


def _cos(a, b) -> float:
    return float(np.dot(a, b))


def test_each_text_is_read_in_its_context_and_pooled_from_its_own_tokens():
    embedder = get_embedder()
    ((question, reply),) = embed_sequences(embedder, [([QUESTION, REPLY], None, None)])
    ((other, reply_to_cats),) = embed_sequences(
        embedder, [(["Do you like cats?", REPLY], None, None)]
    )
    ((alone,),) = embed_sequences(embedder, [([REPLY], None, None)])
    ((after_question,),) = embed_sequences(embedder, [([REPLY], QUESTION, None)])
    for vector in (question, reply, other, reply_to_cats, alone, after_question):
        assert len(vector) == 384 and np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
    # The same words mean something else after another turn, and stay themselves.
    assert _cos(reply, reply_to_cats) < 0.99
    unrelated = embedder.embed_one("The stock market fell sharply on Monday.")
    assert _cos(reply, alone) > 0.5 and _cos(reply, alone) > _cos(reply, unrelated) + 0.3
    # Read after the question, the reply moves towards it; the text before a
    # sequence (a stored turn) is context the same way.
    plain = embedder.embed_one(REPLY)
    asked = embedder.embed_one(QUESTION)
    assert _cos(reply, asked) > _cos(plain, asked) + 0.02
    assert _cos(after_question, asked) > _cos(plain, asked) + 0.02


def test_windows_hold_about_window_tokens_and_a_long_text_is_cut_at_max_tokens(monkeypatch):
    embedder = get_embedder()
    seen: list[list[int]] = []
    real = type(embedder).token_states

    def spy(self, ids):
        seen.extend(ids)
        return real(self, ids)

    monkeypatch.setattr(type(embedder), "token_states", spy)
    short = [f"turn number {i} says hello" for i in range(30)]
    (vectors,) = embed_sequences(embedder, [(short, None, None)])
    assert len(vectors) == 30 and all(v is not None for v in vectors)
    assert 1 < len(seen) <= 6  # several turns to a window
    assert all(len(ids) <= WINDOW_TOKENS + 1 for ids in seen)
    seen.clear()
    long_text = " ".join(f"word{i}" for i in range(600))
    (vectors,) = embed_sequences(embedder, [(["hi", long_text, "bye"], None, None)])
    assert len(vectors) == 3 and max(len(ids) for ids in seen) == MAX_TOKENS


def test_an_embedder_without_token_states_answers_none():
    remote = OpenAIEmbedder(base_url="http://127.0.0.1:9/v1", model="m")  # never called
    assert embed_sequences(remote, [([QUESTION, REPLY], None, None)]) is None


def _vector(pk):
    return list(ConversationTurn.objects.get(pk=pk).embedding)


def test_window_vectors_through_the_api_in_batches_and_one_by_one(api, settings):
    settings.CAIRN_TURN_EMBED_CONTEXT = "window"
    turns = [  # out of order: read by turn_index
        {"role": "assistant", "content": REPLY, "turn_index": 1},
        {"role": "user", "content": QUESTION, "turn_index": 0},
    ]
    response = api.post("/api/v1/sessions/w1/turns/", {"turns": turns}, format="json")
    assert response.status_code == 201, response.content
    reply_id, question_id = (row["id"] for row in response.json()["turns"])
    single = api.post(
        "/api/v1/sessions/w1/turns/",
        {"role": "user", "content": "The museums.", "turn_index": 2},
        format="json",
    ).json()["id"]
    embedder = get_embedder()
    ((question, reply),) = embed_sequences(embedder, [([QUESTION, REPLY], None, None)])
    ((museums,),) = embed_sequences(embedder, [(["The museums."], REPLY, None)])
    assert _vector(question_id) == pytest.approx(question, abs=1e-5)
    assert _vector(reply_id) == pytest.approx(reply, abs=1e-5)
    assert _vector(single) == pytest.approx(museums, abs=1e-5)
    found = api.get("/api/v1/conversations/search/", {"q": "trips to France"}).json()
    assert found["results"][0]["id"] in (question_id, reply_id)


def test_window_backfill_reads_each_turn_after_the_one_before(api, monkeypatch, settings):
    settings.CAIRN_TURN_EMBED_CONTEXT = "window"
    monkeypatch.setattr(turn_text, "get_embedder", lambda: BrokenEmbedder())
    response = api.post(
        "/api/v1/sessions/w2/turns/",
        {"turns": [{"role": ("user", "assistant")[i], "content": t, "turn_index": i}
                   for i, t in enumerate([QUESTION, REPLY])]},
        format="json",
    )  # fmt: skip
    monkeypatch.undo()
    ids = [row["id"] for row in response.json()["turns"]]
    assert ConversationTurn.objects.filter(pk__in=ids, embedding__isnull=True).count() == 2
    assert embed_backfill_run(batch_size=10)["turns"] == 2
    embedder = get_embedder()
    ((question,),) = embed_sequences(embedder, [([QUESTION], None, None)])
    ((reply,),) = embed_sequences(embedder, [([REPLY], QUESTION, None)])
    assert _vector(ids[0]) == pytest.approx(question, abs=1e-5)
    assert _vector(ids[1]) == pytest.approx(reply, abs=1e-5)


def test_a_log_of_one_speakers_notes_is_never_read_together(api, settings):
    """Turns by the same speaker one after another (notes, not a dialogue) each get
    a window of their own: a note's vector does not depend on its neighbours."""
    settings.CAIRN_TURN_EMBED_CONTEXT = "window"
    notes = ["The wifi password is on the fridge.", "Ana's birthday is 3 May.", "Buy oat milk."]
    ids = []
    for session, order in (("n1", notes), ("n2", notes[::-1])):
        turns = [{"role": "user", "content": t, "turn_index": i} for i, t in enumerate(order)]
        response = api.post(f"/api/v1/sessions/{session}/turns/", {"turns": turns}, format="json")
        assert response.status_code == 201, response.content
        ids.append({t: row["id"] for t, row in zip(order, response.json()["turns"], strict=True)})
    embedder = get_embedder()
    for note in notes:
        ((alone,),) = embed_sequences(embedder, [([note], None, None)])
        assert _vector(ids[0][note]) == pytest.approx(alone, abs=1e-5)
        assert _vector(ids[1][note]) == pytest.approx(alone, abs=1e-5)
    # A reply by the other speaker is read with them.
    reply = api.post(
        "/api/v1/sessions/n1/turns/",
        {"role": "assistant", "content": "Noted, oat milk.", "turn_index": 3},
        format="json",
    ).json()["id"]
    ((after,),) = embed_sequences(embedder, [(["Noted, oat milk."], notes[-1], None)])
    assert _vector(reply) == pytest.approx(after, abs=1e-5)
