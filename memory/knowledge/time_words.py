"""When a query asks about: dates and periods named in its words.

"in May 2023", "on 13 October, 2023", "October 13, 2023", "between August 11 and
August 15, 2023", "the first weekend of October 2023", "in 2022", "in June" (any
year), and relative ones ("yesterday", "last week", "last month", "recently",
"last year") read against ``now``. Turn search boosts the turns said
within the window (memory/knowledge/turn_search.py); it never filters, since a
conversation often mentions an event a little after it happened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
# "the first week of May 2023": the week's first day in its month (the last week
# ends with the month).
WEEKS = {"first": 1, "second": 8, "third": 15, "fourth": 22, "last": -7}
_MONTH_NAMES = "|".join(sorted(MONTHS, key=len, reverse=True))
_MONTH = rf"(?P<month>{_MONTH_NAMES})\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY_PATTERNS = (
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I),
)
_PATTERNS = [
    *(("day", pattern) for pattern in _DAY_PATTERNS),
    (
        "week",
        re.compile(
            rf"\b(?P<nth>{'|'.join(WEEKS)})\s+week(?:end)?\s+of\s+{_MONTH},?\s+{_YEAR}\b", re.I
        ),
    ),
    ("month", re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I)),
    ("year", re.compile(rf"\b(?:in|during|of|since)\s+{_YEAR}\b", re.I)),
    # A month alone ("in June") only after a preposition: "may" is also a verb.
    ("month_any_year", re.compile(rf"\b(?:in|during|of|since|early|late)\s+{_MONTH}\b", re.I)),
]
# Two days, the first one's year optional: "between August 11 and August 15, 2023",
# "from 3 May to 9 May 2023".
_FIRST_DAY = rf"(?:{_MONTH_NAMES})\.?\s+\d{{1,2}}\w*|\d{{1,2}}\w*\s+(?:of\s+)?(?:{_MONTH_NAMES})\.?"
_RANGE = re.compile(
    rf"\b(?:between|from)\s+(?P<first>{_FIRST_DAY})(?:,?\s+(?P<first_year>(?:19|20)\d\d))?"
    rf"\s+(?:and|to|until|till|through)\s+",
    re.I,
)
# Periods after a day or a month: what was said a little later still counts. A
# month's events are still being told weeks on (LoCoMo: "What did John attend
# with his colleagues in March 2023?" is answered on 18 April; session any@5
# +3 questions with three weeks instead of two, none lost).
DAY_MARGIN = timedelta(days=1)
WEEK_MARGIN = timedelta(days=7)
MONTH_MARGIN = timedelta(days=21)


@dataclass(frozen=True)
class TimeWindow:
    start: datetime | None = None
    end: datetime | None = None
    month: int | None = None  # any year


def _month_start(year: int, month: int) -> datetime:
    return datetime(year + (month - 1) // 12, (month - 1) % 12 + 1, 1, tzinfo=UTC)


def _day(text: str) -> datetime | None:
    """The day ``text`` starts with ("August 15, 2023", "15th of August 2023")."""
    for pattern in _DAY_PATTERNS:
        found = pattern.match(text)
        if found:
            parts = found.groupdict()
            try:
                return datetime(
                    int(parts["year"]),
                    MONTHS[parts["month"].rstrip(".")],
                    int(parts["day"]),
                    tzinfo=UTC,
                )
            except ValueError:  # 31 February
                return None
    return None


def _day_range(text: str) -> TimeWindow | None:
    """The days from one date to another, both named; the later one gives the year
    when the first has none."""
    found = _RANGE.search(text)
    if not found:
        return None
    last = _day(text[found.end() :])
    if last is None:
        return None
    year = found.group("first_year") or str(last.year)
    first = _day(f"{found.group('first')} {year}")
    if first is None or first > last:
        return None
    return TimeWindow(first - DAY_MARGIN, last + timedelta(days=1) + DAY_MARGIN)


def query_time_window(query: str, *, now: datetime) -> TimeWindow | None:
    """The period a query names, or None (the first one named wins)."""
    text = query.casefold()
    period = _day_range(text)
    if period:
        return period
    for kind, pattern in _PATTERNS:
        found = pattern.search(text)
        if not found:
            continue
        parts = found.groupdict()
        month = MONTHS.get((parts.get("month") or "").rstrip("."))
        try:
            if kind == "day":
                day = datetime(int(parts["year"]), month, int(parts["day"]), tzinfo=UTC)
                return TimeWindow(day - DAY_MARGIN, day + timedelta(days=1) + DAY_MARGIN)
            if kind == "week":
                first = WEEKS[parts["nth"]]
                start = (
                    datetime(int(parts["year"]), month, first, tzinfo=UTC)
                    if first > 0
                    else _month_start(int(parts["year"]), month + 1) + timedelta(days=first)
                )
                return TimeWindow(start - DAY_MARGIN, start + timedelta(days=7) + WEEK_MARGIN)
            if kind == "month":
                start = _month_start(int(parts["year"]), month)
                return TimeWindow(start, _month_start(start.year, month + 1) + MONTH_MARGIN)
        except ValueError:  # 31 February
            continue
        if kind == "year":
            year = int(parts["year"])
            return TimeWindow(
                datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
            )
        if kind == "month_any_year" and month:
            return TimeWindow(month=month)
    relative = {
        "yesterday": (timedelta(days=2), timedelta(0)),
        "last week": (timedelta(days=14), timedelta(0)),
        "this week": (timedelta(days=7), timedelta(0)),
        "last month": (timedelta(days=62), timedelta(0)),
        "recently": (timedelta(days=30), timedelta(0)),
        "lately": (timedelta(days=30), timedelta(0)),
    }
    for words, (back, until) in relative.items():
        if re.search(rf"\b{words}\b", text):
            return TimeWindow(now - back, now - until + timedelta(seconds=1))
    if re.search(r"\blast year\b", text):
        return TimeWindow(
            datetime(now.year - 1, 1, 1, tzinfo=UTC), datetime(now.year, 1, 1, tzinfo=UTC)
        )
    return None
