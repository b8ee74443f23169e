"""Adversarial inputs for the text scanners, shared by the test and bench/bench_scan.py.

Each family is a shape that made a backtracking pattern slow: long runs of one
whitespace character after a keyword, many newlines before a near-match, a
keyword repeated, and prefixes that almost start a match (an unclosed quote, a
token prefix, a URL without its password).
"""

from __future__ import annotations

FAMILIES: dict[str, str] = {
    "spaces after a keyword": "the agent" + " " * 64,
    "newlines": "\n",
    "tabs": "\t",
    "repeated keyword": "agent should ",
    "ignore prefix": "ignore all previous ",
    "curl without pipe": "curl http://x ",
    "run prefix": "run the following ",
    "usage without colon": "\n  usage",
    "token prefixes": "sk- eyJ- ghp_ AKIA glpat- ",
    "assignment prefixes": "password = token: 'x secret=",
    "url credential prefix": "https://user:",
    "unclosed quotes": '"\\',
    "base64-ish run": "QUJD",
    "shell substitution": "$(",
    "email-ish": "forward a@b ",
}


def adversarial(family: str, size: int) -> str:
    """``size`` characters of ``family``'s unit repeated (a long run, not prose)."""
    unit = FAMILIES[family]
    if family == "spaces after a keyword":
        return ("the agent" + " " * size)[:size]
    if family in ("newlines", "tabs"):
        return "the agent" + unit * size
    return (unit * (size // len(unit) + 1))[:size]
