"""When a query asks about: dates and periods named in its words, as a soft window.

Named in full: "in May 2023", "on 13 October, 2023", "October 13, 2023", "between
August 11 and August 15, 2023", "the first weekend of October 2023", "in 2022",
"two weeks before August 11, 2023" (the period runs back from that day).
Read against a reference time ``now`` (the request's ``as_of``, else the server's
clock): "in June" (the latest June that began by then), "yesterday", "the day
before yesterday", "today", "a couple of days ago", "10 days ago", "three weeks
ago", "last Tuesday", "on Friday", "last weekend", "last week", "last month",
"this year", "last year", "recently".

A small grammar rather than a general date parser: every phrase it reads is listed
here and tested one by one (tests/memory/knowledge/test_time_words.py), and a
month that is also a verb ("may", "march") counts only after a preposition. Turn search and recall lift what was said within the window
(memory/knowledge/turn_search.py, recall_sources.py); it never filters, since a
conversation often mentions an event a little after it happened.
"""

from __future__ import annotations

import math
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
    """A soft window: turns and items said within [start, end) rank higher."""

    start: datetime
    end: datetime
    expression: str = ""  # the words of the query it was read from

    def as_dict(self) -> dict:
        return {"expression": self.expression, "start": self.start, "end": self.end}


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


def _day_range(text: str) -> tuple[datetime, datetime, re.Match] | None:
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
    return first - DAY_MARGIN, last + timedelta(days=1) + DAY_MARGIN, found


# --------------------------------------------------------------------------- relative

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY = rf"(?P<weekday>{'|'.join(WEEKDAYS)})"
_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a couple": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 4,
}
_COUNT = (
    r"(?P<count>\d{1,3}|"
    + "|".join(sorted((re.escape(w) for w in _NUMBER_WORDS), key=len, reverse=True))
    + ")"
)
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_UNIT = r"(?P<unit>day|week|month|year)s?"
DAY = timedelta(days=1)

#: Expressions read against the reference time (``as_of``), in the order tried.
_RELATIVE = [
    ("ago", re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b")),
    ("before_yesterday", re.compile(r"\b(?:the\s+)?day\s+before\s+yesterday\b")),
    ("yesterday", re.compile(r"\byesterday\b|\blast\s+night\b")),
    ("today", re.compile(r"\btoday\b|\btonight\b|\bthis\s+(?:morning|afternoon|evening)\b")),
    ("last_weekday", re.compile(rf"\blast\s+{_WEEKDAY}\b")),
    ("this_weekday", re.compile(rf"\b(?:on|this|past)\s+{_WEEKDAY}\b")),
    ("last_weekend", re.compile(r"\b(?:last|past|this)\s+weekend\b")),
    ("last_week", re.compile(r"\b(?:last|past)\s+week\b")),
    ("this_week", re.compile(r"\bthis\s+week\b")),
    ("last_month", re.compile(r"\b(?:last|past)\s+month\b")),
    ("this_month", re.compile(r"\bthis\s+month\b")),
    ("last_year", re.compile(r"\b(?:last|past)\s+year\b")),
    ("this_year", re.compile(r"\bthis\s+year\b")),
    ("recently", re.compile(r"\b(?:recently|lately|the\s+other\s+day)\b")),
]
# "two weeks before August 11, 2023", "the week before 3 August 2023", "last weekend
# before April 10, 2023": the period runs back from that day, which is the reference.
_BEFORE_DAY = re.compile(
    rf"\b(?:(?:the|a|last)\s+)?(?:{_COUNT}\s+)?(?P<unit>day|week(?:end)?|month|year)s?\s+before\s+$"
)


def _day_start(at: datetime) -> datetime:
    return at.replace(hour=0, minute=0, second=0, microsecond=0)


def _relative(kind: str, found: re.Match, ref: datetime) -> tuple[datetime, datetime]:
    """[start, end) of a relative expression read at ``ref`` (see ``_RELATIVE``)."""
    today = _day_start(ref)
    now_end = ref + timedelta(seconds=1)
    if kind == "ago":
        raw = found.group("count")
        count = int(raw) if raw.isdigit() else _NUMBER_WORDS[raw]
        days = count * _UNIT_DAYS[found.group("unit")]
        # About that long ago: a quarter of it either side (rounded up to whole days):
        # a couple of days ago is 1 to 3 days back, 10 days ago 7 to 13, 4 years ago
        # 3 to 5 years.
        spread = timedelta(days=max(1, math.ceil(days / 4)))
        centre = today - timedelta(days=days)
        return centre - spread, min(centre + DAY + spread, now_end)
    if kind == "before_yesterday":
        return today - 2 * DAY - DAY_MARGIN, today - DAY + DAY_MARGIN
    if kind == "yesterday":
        return today - DAY - DAY_MARGIN, now_end
    if kind == "today":
        return today - DAY_MARGIN, now_end
    if kind in ("last_weekday", "this_weekday"):
        wanted = WEEKDAYS.index(found.group("weekday"))
        back = (today.weekday() - wanted) % 7
        if kind == "last_weekday" and back == 0:
            back = 7  # "last Tuesday" said on a Tuesday: a week ago
        day = today - timedelta(days=back)
        return day - DAY_MARGIN, min(day + DAY + DAY_MARGIN, now_end)
    if kind == "last_weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7)
        return saturday - DAY_MARGIN, min(saturday + 2 * DAY + DAY_MARGIN, now_end)
    if kind == "last_week":
        return today - 14 * DAY, now_end
    if kind == "this_week":
        return today - 7 * DAY, now_end
    if kind == "last_month":
        first = _month_start(today.year, today.month - 1)
        return first, min(_month_start(today.year, today.month) + WEEK_MARGIN, now_end)
    if kind == "this_month":
        return _month_start(today.year, today.month), now_end
    if kind == "last_year":
        return datetime(today.year - 1, 1, 1, tzinfo=UTC), datetime(today.year, 1, 1, tzinfo=UTC)
    if kind == "this_year":
        return datetime(today.year, 1, 1, tzinfo=UTC), now_end
    # recently: the last month
    return today - 30 * DAY, now_end


def _before_day(text: str, found: re.Match, day: datetime) -> tuple[datetime, int] | None:
    """The start of "two weeks before <day>" when the words before the date say so, and
    where those words begin."""
    before = _BEFORE_DAY.search(text[: found.start()])
    if not before:
        return None
    raw = before.group("count")
    count = 1 if raw is None else int(raw) if raw.isdigit() else _NUMBER_WORDS[raw]
    unit = before.group("unit")
    days = count * (2 if unit == "weekend" else _UNIT_DAYS[unit])
    return day - timedelta(days=days + max(1, math.ceil(days / 4))), before.start()


def query_time_window(query: str, *, now: datetime) -> TimeWindow | None:
    """The period a query names, or None. Dates named in full win (the first one);
    then relative words ("yesterday", "10 days ago", "last Tuesday", "in March")
    read against ``now``, the request's ``as_of``."""
    text = query.casefold()
    period = _day_range(text)
    if period:
        start, end, found = period
        return TimeWindow(start, end, query[found.start() : found.end()].strip() + "…")
    for kind, pattern in _PATTERNS:
        found = pattern.search(text)
        if not found:
            continue
        parts = found.groupdict()
        month = MONTHS.get((parts.get("month") or "").rstrip("."))
        words = query[found.start() : found.end()].strip()
        try:
            if kind == "day":
                day = datetime(int(parts["year"]), month, int(parts["day"]), tzinfo=UTC)
                before = _before_day(text, found, day)
                if before:
                    words = query[before[1] : found.end()].strip()
                start = before[0] if before else day - DAY_MARGIN
                return TimeWindow(start, day + DAY + DAY_MARGIN, words)
            if kind == "week":
                first = WEEKS[parts["nth"]]
                start = (
                    datetime(int(parts["year"]), month, first, tzinfo=UTC)
                    if first > 0
                    else _month_start(int(parts["year"]), month + 1) + timedelta(days=first)
                )
                return TimeWindow(start - DAY_MARGIN, start + 7 * DAY + WEEK_MARGIN, words)
            if kind == "month":
                start = _month_start(int(parts["year"]), month)
                return TimeWindow(start, _month_start(start.year, month + 1) + MONTH_MARGIN, words)
        except ValueError:  # 31 February
            continue
        if kind == "year":
            year = int(parts["year"])
            return TimeWindow(
                datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC), words
            )
        if kind == "month_any_year" and month:
            # The latest such month that began by ``now``: "in March" asked in December
            # 2026 is March 2026; asked in February 2026, March 2025.
            year = now.year if month <= now.month else now.year - 1
            start = _month_start(year, month)
            return TimeWindow(start, _month_start(year, month + 1) + MONTH_MARGIN, words)
    for kind, pattern in _RELATIVE:
        found = pattern.search(text)
        if found:
            start, end = _relative(kind, found, now)
            return TimeWindow(start, end, query[found.start() : found.end()].strip())
    return None
