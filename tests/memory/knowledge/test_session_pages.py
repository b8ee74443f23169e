"""group=session gives one order whatever page is asked: the first five sessions of
a page of 5 and of a page of 50 agree, pages of 5 add up to the page of 50, and
the scores fall all the way down (memory/knowledge/turn_search.py,
``_sessions_ranked``)."""

from __future__ import annotations

import random

import pytest

from tests.memory.knowledge.test_turn_search import SEARCH, _store

pytestmark = pytest.mark.django_db

WORDS = "kayak lighthouse violin orchard glacier falcon lantern harbor meadow compass".split()
FILLER = "we talked about it for a while after dinner and it was fun".split()
QUERY = "kayak lighthouse violin orchard"


def _corpus(api, sessions: int = 70) -> None:
    """Sessions of three turns, each naming two or three of WORDS among filler: many
    more matching turns than the ranked depth, in sessions that say the query's
    words in different shares."""
    rng = random.Random(17)
    for n in range(sessions):
        turns = []
        for _ in range(3):
            words = rng.sample(WORDS, rng.choice((2, 3))) + rng.sample(FILLER, 6)
            rng.shuffle(words)
            turns.append(" ".join(words).capitalize() + ".")
        _store(api, f"s{n:02d}", turns)


def _page(api, **params):
    body = api.get(SEARCH, {"q": QUERY, "group": "session", **params}).json()
    return [(s["session_id"], s["score"]) for s in body["sessions"]], body["count"]


def test_session_pages_agree_with_each_other_and_with_the_default_page(api):
    _corpus(api)
    five, _ = _page(api, limit=5)
    fifty, count = _page(api, limit=50)  # the default page size asks 10 × as deep
    assert len(fifty) == 50 and count >= 50
    paged = []
    for offset in range(0, 50, 5):
        page, _ = _page(api, limit=5, offset=offset)
        paged += [s for s, _ in page]
    assert paged == [s for s, _ in fifty]  # no session twice, none skipped
    assert [s for s, _ in five] == [s for s, _ in fifty[:5]]
    assert [score for _, score in five] == pytest.approx([score for _, score in fifty[:5]])
    scores = [score for _, score in fifty]
    assert scores == sorted(scores, reverse=True)


def test_pages_past_the_ranked_depth_follow_it_by_best_turn(api, settings):
    settings.CAIRN_TURN_SESSION_DEPTH = 12  # the head: sessions among the 12 best turns
    _corpus(api, sessions=30)
    head, _ = _page(api, limit=3)
    everything, count = _page(api, limit=30)
    assert [s for s, _ in head] == [s for s, _ in everything[:3]]
    assert count == len(everything) > 12  # the tail reached past the head's sessions
    assert len({s for s, _ in everything}) == len(everything)
    scores = [score for _, score in everything]
    assert scores == sorted(scores, reverse=True)
    # The tail is ordered by each session's best turn, and a deeper page only extends it.
    deeper, _ = _page(api, limit=10, offset=20)
    assert [s for s, _ in deeper] == [s for s, _ in everything[20:30]]
