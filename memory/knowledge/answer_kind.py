"""What a question asks for, and how a turn that could answer it looks.

Two signals turn search adds to its fused relevance (memory/knowledge/turn_search.py),
both measured on LoCoMo by bench/bench_recall.py:

- **A turn that asks is rarely the answer.** "What's your favourite game?" shares
  every word with "What is Nate's favourite video game?", but the answer is the
  turn after it. A turn whose own words end in a question mark keeps
  ``1 - CAIRN_TURN_QUESTION_PENALTY`` of its relevance and passes
  ``CAIRN_TURN_QUESTION_CREDIT`` of it to the next turn of its session.
- **The kind of answer wanted.** "When did …", "what year …" want a turn that
  says when ("last week", "yesterday", "in May", "2022"); "how many / how long /
  how much" want a number. Such turns get ``CAIRN_TURN_ANSWER_BOOST``.

The turn-side patterns are PostgreSQL regular expressions (``~*``; ``\\y`` is a
word boundary there), applied to the few fused candidates only.
"""

from __future__ import annotations

import re

_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_UNITS = r"days?|weeks?|months?|years?"

#: A turn that says when something happened (PostgreSQL ARE, case-insensitive).
TIME_ANSWER_SQL = (
    r"\y(yesterday|today|tonight|tomorrow|ago|recently|just"
    rf"|(last|next|this) (week|weekend|month|year|night|morning|summer|winter|spring|fall|autumn"
    rf"|{_WEEKDAYS})"
    rf"|{_MONTHS}|{_WEEKDAYS}|(19|20)[0-9][0-9]"
    rf"|(a|one|two|three|four|five|six|few|couple of) ({_UNITS}))\y"
)

#: A turn that holds a quantity.
NUMBER_ANSWER_SQL = (
    r"\y([0-9]+|one|two|three|four|five|six|seven|eight|nine|ten|twice|once|dozen|hundred"
    r"|thousand)\y"
)

#: What a trailing "[…]" aside is (a shared photo's caption, a note): not the turn's words.
TRAILING_ASIDE_SQL = r"\s*\[[^]]*\]\s*$"

_TIME_QUESTION = re.compile(
    r"^\s*when\b|\bwhen (?:did|does|do|is|was|were|will|has|have|had)\b"
    r"|\bwhat (?:year|month|date|day|time)\b|\bhow long ago\b",
    re.IGNORECASE,
)
_NUMBER_QUESTION = re.compile(r"\bhow (?:many|much|long|often|old)\b", re.IGNORECASE)


def answer_kind(question: str) -> str | None:
    """``time`` for a question asking when, ``number`` for one asking how many, else None."""
    if _TIME_QUESTION.search(question):
        return "time"
    if _NUMBER_QUESTION.search(question):
        return "number"
    return None


def answer_pattern(question: str) -> str | None:
    """The PostgreSQL pattern a turn answering ``question`` would match, if any."""
    kind = answer_kind(question)
    if kind == "time":
        return TIME_ANSWER_SQL
    if kind == "number":
        return NUMBER_ANSWER_SQL
    return None
