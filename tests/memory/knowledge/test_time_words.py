"""Periods named in queries (turn search's time boost)."""

from datetime import UTC, datetime

import pytest

from memory.knowledge.time_words import TimeWindow, query_time_window

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("What did she paint on October 13, 2023?", (2023, 10, 12), (2023, 10, 15)),
        ("Who came over on 1 February, 2023?", (2023, 1, 31), (2023, 2, 3)),
        ("What setback did Melanie face in October 2023?", (2023, 10, 1), (2023, 11, 22)),
        ("Where did we go in December 2022?", (2022, 12, 1), (2023, 1, 22)),
        ("Where was John between August 11 and August 15 2023?", (2023, 8, 10), (2023, 8, 17)),
        ("What happened from 3rd of May to 9 June, 2023?", (2023, 5, 2), (2023, 6, 11)),
        ("between 20 December 2022 and 2 January 2023", (2022, 12, 19), (2023, 1, 4)),
        (
            "What was Dave doing in the first weekend of October 2023?",
            (2023, 9, 30),
            (2023, 10, 15),
        ),
        ("Where was Calvin in the last week of October 2023?", (2023, 10, 24), (2023, 11, 8)),
        ("How many beach trips in 2023?", (2023, 1, 1), (2024, 1, 1)),
        ("What happened last year?", (2025, 1, 1), (2026, 1, 1)),
    ],
)
def test_dates_months_and_years_become_windows(query, start, end):
    window = query_time_window(query, now=NOW)
    assert window.start == datetime(*start, tzinfo=UTC)
    assert window.end == datetime(*end, tzinfo=UTC)


def test_a_backwards_or_impossible_range_is_read_as_the_one_full_date_it_holds():
    # Not a span: the query is read as if it named no range, by the patterns above.
    backwards = query_time_window("between August 15 and August 11 2023", now=NOW)
    assert (backwards.start, backwards.end) == (
        datetime(2023, 8, 10, tzinfo=UTC),
        datetime(2023, 8, 13, tzinfo=UTC),
    )
    impossible = query_time_window("between 31 February and 3 March 2023", now=NOW)
    assert impossible.start == datetime(2023, 3, 2, tzinfo=UTC)


def test_a_month_alone_matches_that_month_of_any_year_but_may_the_verb_does_not():
    assert query_time_window("When did Melanie go camping in June?", now=NOW) == TimeWindow(month=6)
    assert query_time_window("May I ask what Caroline likes?", now=NOW) is None
    assert query_time_window("What did we decide about the API?", now=NOW) is None


def test_relative_words_read_against_now():
    window = query_time_window("what did I say last week about the deploy", now=NOW)
    assert window.start == datetime(2026, 11, 17, 12, 0, tzinfo=UTC) and window.end > NOW
