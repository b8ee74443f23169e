"""Judging a pair of similar texts: duplicate, contradiction or neutral.

Two judges behind one interface. :class:`HeuristicJudge` needs no model.
:class:`ChatJudge` asks an OpenAI-compatible chat endpoint
(``CAIRN_JUDGE_URL``, ``CAIRN_JUDGE_MODEL``, ``CAIRN_JUDGE_API_KEY``); it is the
only code in Cairn that talks to that endpoint (``chat_complete`` also writes
consolidation summaries). A judge that cannot answer raises
:class:`JudgeUnavailable`; callers leave the pair unjudged for the next run and
never guess (a model's silence is not a verdict).
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings

from memory.models import PairVerdict

NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "none",
        "cannot",
        "can't",
        "don't",
        "doesn't",
        "isn't",
        "aren't",
        "won't",
        "without",
        "disabled",
        "nor",
    }
)
STOP_WORDS = frozenset(
    "a an the is are was were be been to of in on at for and or it its this that with by as "
    "from uses use runs run has have".split()
)
_TOKEN = re.compile(r"[A-Za-z0-9][\w.'\-/]*")


class JudgeUnavailable(Exception):
    """The judge could not answer (timeout, HTTP error, an answer it cannot parse)."""


@dataclass(frozen=True)
class Judgement:
    verdict: str  # a PairVerdict value
    judge: str  # "heuristic" or "chat:<model>"
    note: str = ""  # why, in words without content (e.g. "numbers differ")


class Judge(Protocol):
    name: str

    def judge(self, a: str, b: str) -> Judgement: ...


def _tokens(text: str) -> list[str]:
    return [t.rstrip(".,;:!?'-/") for t in _TOKEN.findall(text)]


def _has_digit(token: str) -> bool:
    return any(ch.isdigit() for ch in token)


class HeuristicJudge:
    """Rules on the words that differ, no model.

    1. The same words (case and punctuation aside) → duplicate.
    2. Few shared content words → neutral (similar wording, different subjects).
    3. A negation on one side only → contradiction.
    4. A number, version or date on each side that the other lacks → contradiction.
    5. A capitalised name on each side that the other lacks, with little else
       differing → contradiction.
    6. Nearly all content words shared and nothing with a digit differing → duplicate.
    7. Otherwise neutral.
    """

    name = "heuristic"

    def judge(self, a: str, b: str) -> Judgement:
        raw_a, raw_b = _tokens(a), _tokens(b)
        sa, sb = {t.lower() for t in raw_a}, {t.lower() for t in raw_b}
        if sa == sb:
            return Judgement(PairVerdict.DUPLICATE, self.name, "same words")
        ca, cb = sa - STOP_WORDS, sb - STOP_WORDS
        if not ca or not cb:
            return Judgement(PairVerdict.NEUTRAL, self.name, "no content words")
        shared = ca & cb
        overlap = len(shared) / min(len(ca), len(cb))
        only_a, only_b = ca - cb, cb - ca
        if overlap < 0.5:
            return Judgement(PairVerdict.NEUTRAL, self.name, "different subjects")
        if (sa ^ sb) & NEGATIONS:
            return Judgement(PairVerdict.CONTRADICTION, self.name, "a negation differs")
        if any(map(_has_digit, only_a)) and any(map(_has_digit, only_b)):
            return Judgement(PairVerdict.CONTRADICTION, self.name, "a number or version differs")
        names_a = {t.lower() for t in raw_a[1:] if t[:1].isupper()} & only_a
        names_b = {t.lower() for t in raw_b[1:] if t[:1].isupper()} & only_b
        if names_a and names_b and len(only_a) <= 3 and len(only_b) <= 3:
            return Judgement(PairVerdict.CONTRADICTION, self.name, "a name differs")
        differing = only_a | only_b
        if overlap >= 0.9 and len(differing) <= 2 and not any(map(_has_digit, differing)):
            return Judgement(PairVerdict.DUPLICATE, self.name, "near-identical")
        return Judgement(PairVerdict.NEUTRAL, self.name, "no conflict found")


class _RateLimit:
    """At most ``per_minute`` calls a minute in this process (spaced evenly)."""

    def __init__(self, per_minute: int):
        self.interval = 60.0 / max(1, per_minute)
        self.lock = threading.Lock()
        self.next_at = 0.0

    def wait(self) -> None:
        with self.lock:
            now = time.monotonic()
            delay = self.next_at - now
            self.next_at = max(now, self.next_at) + self.interval
        if delay > 0:
            time.sleep(delay)


_limits: dict[int, _RateLimit] = {}


def _limit() -> _RateLimit:
    per_minute = settings.CAIRN_JUDGE_MAX_PER_MINUTE
    if per_minute not in _limits:
        _limits[per_minute] = _RateLimit(per_minute)
    return _limits[per_minute]


def chat_configured() -> bool:
    return bool(settings.CAIRN_JUDGE_URL and settings.CAIRN_JUDGE_MODEL)


def chat_complete(*, system: str, user: str, max_tokens: int = 300) -> str:
    """One chat completion from the configured endpoint, or :class:`JudgeUnavailable`."""
    if not chat_configured():
        raise JudgeUnavailable("no chat model configured")
    body = json.dumps(
        {
            "model": settings.CAIRN_JUDGE_MODEL,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
            "max_tokens": max_tokens,
        }
    ).encode()
    headers = {"Content-Type": "application/json"}
    if settings.CAIRN_JUDGE_API_KEY:
        headers["Authorization"] = f"Bearer {settings.CAIRN_JUDGE_API_KEY}"
    url = settings.CAIRN_JUDGE_URL.rstrip("/") + "/chat/completions"
    _limit().wait()
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=settings.CAIRN_JUDGE_TIMEOUT_S) as response:
            payload = json.loads(response.read().decode())
        return str(payload["choices"][0]["message"]["content"]).strip()
    except (urllib.error.URLError, TimeoutError, OSError, ValueError, KeyError, IndexError) as exc:
        raise JudgeUnavailable(f"chat endpoint: {type(exc).__name__}") from None


JUDGE_PROMPT = (
    "You compare two short memory items an AI agent stored. Answer with exactly one word: "
    "duplicate (they say the same thing), contradiction (they cannot both be true now), "
    "or neutral (neither)."
)


class ChatJudge:
    def __init__(self, model: str | None = None):
        self.name = f"chat:{model or settings.CAIRN_JUDGE_MODEL}"[:100]

    def judge(self, a: str, b: str) -> Judgement:
        answer = chat_complete(system=JUDGE_PROMPT, user=f"A: {a}\nB: {b}", max_tokens=5)
        word = (re.findall(r"[a-z]+", answer.lower()) or [""])[0]
        if word not in PairVerdict.values:
            raise JudgeUnavailable("the chat model's answer was not a verdict")
        return Judgement(word, self.name, "chat model")


def judge_from_settings() -> Judge:
    """The chat judge when one is configured, else the heuristic."""
    return ChatJudge() if chat_configured() else HeuristicJudge()
