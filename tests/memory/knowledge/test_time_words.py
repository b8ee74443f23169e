"""Periods named in queries (turn search's time boost)."""

import math
from datetime import UTC, datetime, timedelta

import pytest

from memory.knowledge.time_words import query_time_window

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


def test_a_month_alone_is_the_latest_such_month_by_as_of_but_may_the_verb_is_not():
    june = query_time_window("When did Melanie go camping in June?", now=NOW)
    assert (june.start, june.end) == (
        datetime(2026, 6, 1, tzinfo=UTC),
        datetime(2026, 7, 22, tzinfo=UTC),
    )
    assert june.expression == "in June"
    early = datetime(2026, 2, 10, tzinfo=UTC)
    march = query_time_window("what did we plan in March?", now=early)
    assert march.start == datetime(2025, 3, 1, tzinfo=UTC)  # March 2026 has not begun
    assert query_time_window("May I ask what Caroline likes?", now=NOW) is None
    assert query_time_window("What did we decide about the API?", now=NOW) is None


def test_relative_words_read_against_now():
    window = query_time_window("what did I say last week about the deploy", now=NOW)
    assert window.start == datetime(2026, 11, 17, tzinfo=UTC) and window.end > NOW


# as_of: Tuesday 1 December 2026, noon. Each phrase, the day its window starts and
# the day it ends (exclusive); None: the window runs to as_of itself.
AS_OF = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RELATIVE = [
    ("What did I cook for my friend yesterday?", (11, 29), None),
    ("what did we say last night", (11, 29), None),
    ("the day before yesterday", (11, 28), (12, 1)),
    ("what did I eat today", (11, 30), None),
    ("this morning's standup", (11, 30), None),
    ("What did I cook for my friend a couple of days ago?", (11, 28), (12, 1)),
    ("couple of days ago", (11, 28), (12, 1)),
    ("a few days ago", (11, 27), (11, 30)),
    ("What appliance did I buy 10 days ago?", (11, 18), (11, 25)),
    ("ten days ago", (11, 18), (11, 25)),
    ("2 weeks ago", (11, 13), (11, 22)),
    ("two weeks ago", (11, 13), (11, 22)),
    ("a week ago", (11, 22), (11, 27)),
    ("three months ago", (8, 10), (9, 26)),
    ("a year ago", (2025, 8, 31), (2026, 3, 4)),
    ("last Tuesday", (11, 23), (11, 26)),  # said on a Tuesday: a week back
    ("last Monday", (11, 29), None),
    ("last Sunday", (11, 28), (12, 1)),
    ("on Friday", (11, 26), (11, 29)),
    ("this Tuesday", (11, 30), None),  # today
    ("last weekend", (11, 27), (12, 1)),
    ("past week", (11, 17), None),
    ("this week", (11, 24), None),
    ("last month", (11, 1), None),  # November, and a week on, capped at as_of
    ("this month", (12, 1), None),
    ("last year", (2025, 1, 1), (2026, 1, 1)),
    ("this year", (2026, 1, 1), None),
    ("recently", (11, 1), None),
    ("lately", (11, 1), None),
    ("the other day", (11, 1), None),
]


def _day(parts):
    year, month, day = parts if len(parts) == 3 else (2026, *parts)
    return datetime(year, month, day, tzinfo=UTC)


@pytest.mark.parametrize(("query", "start", "end"), RELATIVE)
def test_relative_phrases_are_read_against_as_of(query, start, end):
    window = query_time_window(query, now=AS_OF)
    assert window is not None, query
    assert window.start == _day(start)
    if end is None:
        assert window.end == AS_OF + timedelta(seconds=1)
    else:
        assert window.end == _day(end)
    assert window.end <= AS_OF + timedelta(seconds=1)  # nothing after the question
    assert window.expression.casefold() in query.casefold()


@pytest.mark.parametrize("count", range(1, 31))
@pytest.mark.parametrize("unit", ["day", "week", "month", "year"])
def test_every_count_of_every_unit_ago_centres_on_that_time(count, unit):
    days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * count
    plural = unit if count == 1 else unit + "s"
    window = query_time_window(f"what happened {count} {plural} ago?", now=AS_OF)
    centre = datetime(2026, 12, 1, tzinfo=UTC) - timedelta(days=days)
    assert window.start < centre < window.end <= AS_OF + timedelta(seconds=1)
    # About that long ago: a quarter of the span either side (whole days), at least one.
    assert window.start == centre - timedelta(days=max(1, math.ceil(days / 4)))


@pytest.mark.parametrize("weekday", range(7))
@pytest.mark.parametrize("asked_on", range(7))
def test_last_weekday_is_the_latest_one_strictly_before_the_day_asked(weekday, asked_on):
    from memory.knowledge.time_words import WEEKDAYS

    as_of = datetime(2026, 11, 30, 9, 0, tzinfo=UTC) + timedelta(days=asked_on)  # a Monday on
    window = query_time_window(f"what did we agree last {WEEKDAYS[weekday]}?", now=as_of)
    day = window.start + timedelta(days=1)  # the window starts a day early
    assert day.weekday() == weekday
    assert timedelta(days=1) <= as_of.replace(hour=0) - day <= timedelta(days=7)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        # The period runs back from the day named: the turn that tells of it is
        # usually said on that day ("I got her two weeks ago").
        ("the puppy she got two weeks before August 11, 2023", (2023, 7, 24), (2023, 8, 13)),
        ("What did John do the week before August 3, 2023?", (2023, 7, 25), (2023, 8, 5)),
        ("last weekend before April 10, 2023", (2023, 4, 7), (2023, 4, 12)),
        ("What did Joanna finish last Friday on 23 January, 2022?", (2022, 1, 22), (2022, 1, 25)),
    ],
)
def test_a_period_before_a_named_day_runs_back_from_it(query, start, end):
    window = query_time_window(query, now=AS_OF)
    assert (window.start, window.end) == (_day(start), _day(end))


@pytest.mark.parametrize(
    "query",
    [
        "How long ago was Caroline's 18th birthday?",  # no count
        "What did we decide about the API?",
        "Will you march with us?",
        "I may go",
        "the days are long",
        "a weekend trip",
        "ago",
    ],
)
def test_words_that_name_no_period_give_no_window(query):
    assert query_time_window(query, now=AS_OF) is None
