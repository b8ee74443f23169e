"""Coverage across sessions (issue 54): ``turns_diversified`` lets other sessions that
match take the places after a session's best turns."""

from __future__ import annotations

from datetime import UTC, datetime

from memory.knowledge.turn_search import TurnHit, turns_diversified

AT = datetime(2023, 5, 8, tzinfo=UTC)


def _hits(*pairs):
    return [
        TurnHit(i, session, "user", i, "global", AT, "", None, None, relevance)
        for i, (session, relevance) in enumerate(pairs)
    ]


def test_a_cluster_in_one_session_yields_to_the_next_session_that_matches():
    hits = _hits(("a", 1.0), ("a", 0.9), ("a", 0.85), ("b", 0.7), ("a", 0.6), ("c", 0.5))
    out = turns_diversified(hits, decay=0.3, pool=6)
    assert [(h.session_id, h.id) for h in out] == [
        ("a", 0),  # 1.0
        ("b", 3),  # 0.7 against a's second, 0.9 × 0.7 = 0.63
        ("a", 1),  # 0.63
        ("c", 5),  # 0.5 against a's third, 0.85 × 0.49 = 0.4165
        ("a", 2),
        ("a", 4),
    ]
    scores = [h.score for h in out]
    assert scores == sorted(scores, reverse=True)
    assert scores[:3] == [1.0, 0.7, 0.9 * 0.7]


def test_no_decay_keeps_the_order_and_the_pool_bounds_what_moves():
    hits = _hits(("a", 1.0), ("a", 0.9), ("b", 0.8), ("a", 0.7), ("b", 0.65))
    assert [h.id for h in turns_diversified(hits, decay=0.0, pool=5)] == [0, 1, 2, 3, 4]
    out = turns_diversified(
        _hits(("a", 1.0), ("a", 0.9), ("b", 0.8), ("b", 0.7)), decay=0.5, pool=2
    )
    assert [h.id for h in out] == [0, 1, 2, 3]  # b's turns lie past the pool
    assert out[2].score <= out[1].score  # capped by the last one placed


def test_the_order_of_a_prefix_does_not_depend_on_what_follows_the_pool():
    base = [("a", 1.0), ("a", 0.95), ("b", 0.9), ("c", 0.6), ("a", 0.55)]
    short = turns_diversified(_hits(*base), decay=0.3, pool=5)
    longer = turns_diversified(_hits(*base, ("d", 0.5), ("e", 0.4)), decay=0.3, pool=5)
    assert [h.id for h in short] == [h.id for h in longer][:5]
