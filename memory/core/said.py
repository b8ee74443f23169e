"""What a person said, as sentences: the text half of consent (SPEC section 6).

A claim is backed by a person's turn only when it *is* one whole sentence of
that turn, after folding. The grammar, stated so it can be tested:

1. **Sentences.** A turn is split at a line break, and after a run of sentence
   terminators (``. ! ? … 。 ！ ？ ؟ ‼ ⁇ ⁈ ⁉ ।`` and the Greek question mark; not
   ``;``, so "Use X; never mind" is one sentence)
   followed, after any closing quotes or brackets, by white space or the end of
   the turn. A full stop inside a word (``example.com``, ``3.5``) ends nothing.
2. **Folding.** Unicode NFKC, case folded, curly apostrophes made straight, runs
   of white space made one space, and the end punctuation (terminators, then
   white space) stripped. Nothing else is removed: words, inner punctuation and
   quotation marks stay, so "Never use X" and "Do not ever use X" are not "Use
   X" — negation is decided by equality, not by a list of negation words.
3. **Statements only.** A sentence ending in a question mark of any script, or
   opening with ``¿``, is a question and backs nothing.
4. **Not quoted.** A sentence that starts inside a quotation (``"`` ``“”``
   ``„“`` ``«»`` ``‹›`` ``「」`` ``『』``, and ``'…'`` / ``‘…’`` opened at the
   start of a word and closed at the end of one, so ``don't`` is no quote) or
   is wholly wrapped in quotation marks is someone else's words repeated, and
   backs nothing.

Known limit, said plainly: context before a sentence ("Don't do the following.
Use X.") is not read; the claim still has to be one of the person's own
sentences word for word, which the review UI shows beside the delta.
"""

from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple

TERMINATORS = ".!?…。！？؟‼⁇⁈⁉।\u037e"
QUESTION_MARKS = "?？؟⁇⁈⁉\u037e⸮"
INVERTED_QUESTION = "¿"
# Opening mark -> the marks that close it.
_PAIRS = {
    '"': '"',
    "“": "”“",
    "„": "“”",
    "«": "»",
    "»": "«",
    "‹": "›",
    "「": "」",
    "『": "』",
    "'": "'",
    "‘": "’",
    "‚": "‘’",
}
_SINGLE = {"'", "‘", "‚", "’"}
_CLOSERS = "\"'”’»›」』)]}"
_APOSTROPHES = str.maketrans({"’": "'", "ʼ": "'", "`": "'"})
_SPACE = re.compile(r"\s+")


class Sentence(NamedTuple):
    text: str  # as written
    start: int  # offsets in the turn
    end: int
    question: bool
    quoted: bool


def fold(text: str) -> str:
    """A sentence as compared: NFKC, case folded, straight apostrophes, one space,
    without end punctuation."""
    text = unicodedata.normalize("NFKC", text).casefold().translate(_APOSTROPHES)
    text = _SPACE.sub(" ", text).strip()
    return text.rstrip(TERMINATORS + " ").strip()


def _quoted_spans(text: str) -> list[tuple[int, int]]:
    """Where quotations are: (start of the opening mark, end of the closing mark)."""
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(text):
        mark = text[i]
        if mark in _PAIRS and _opens(text, i):
            close = _closing(text, i)
            if close is not None:
                spans.append((i, close + 1))
                i = close + 1
                continue
        i += 1
    return spans


def _opens(text: str, i: int) -> bool:
    """A single quotation mark opens only at the start of a word (``don't`` is no quote)."""
    if text[i] not in _SINGLE:
        return True
    before = text[i - 1] if i else " "
    after = text[i + 1] if i + 1 < len(text) else " "
    return not before.isalnum() and not after.isspace()


def _closing(text: str, i: int) -> int | None:
    closers = _PAIRS[text[i]]
    for j in range(i + 1, len(text)):
        if text[j] == "\n" and text[i] in _SINGLE:
            return None  # a stray apostrophe does not quote the rest of the turn
        if text[j] in closers:
            if text[i] in _SINGLE:
                after = text[j + 1] if j + 1 < len(text) else " "
                if after.isalnum():
                    continue  # an apostrophe inside a word
            return j
    return None


def sentences(text: str) -> list[Sentence]:
    """The turn's sentences, by the grammar in the module docstring."""
    spans = _quoted_spans(text)
    out: list[Sentence] = []
    start = 0
    i = 0
    n = len(text)

    def emit(end: int) -> None:
        raw = text[start:end]
        lead = len(raw) - len(raw.lstrip())
        body = raw.strip()
        if not body:
            return
        s, e = start + lead, start + lead + len(body)
        core = body.rstrip()
        stripped_end = core.rstrip(_CLOSERS)
        question = stripped_end.rstrip()[-1:] in QUESTION_MARKS or core.lstrip(_CLOSERS).startswith(
            INVERTED_QUESTION
        )
        inside = any(a < s < b for a, b in spans)
        wrapped = any(a <= s and e <= b for a, b in spans)
        out.append(Sentence(body, s, e, question, inside or wrapped))

    while i < n:
        ch = text[i]
        if ch == "\n":
            emit(i)
            start = i + 1
            i += 1
            continue
        if ch in TERMINATORS:
            j = i
            while j < n and text[j] in TERMINATORS:
                j += 1
            k = j
            while k < n and text[k] in _CLOSERS:
                k += 1
            if k >= n or text[k].isspace():
                # Also inside a quotation: the quoted sentence then starts inside
                # it, or is wrapped by it, and backs nothing either way.
                emit(k)
                start = k
                i = k
                continue
            i = j
            continue
        i += 1
    emit(n)
    return out


class Match(NamedTuple):
    """How a claim stands against one turn."""

    verbatim: bool  # one whole sentence of the turn equals the claim
    sentence: str  # the sentence that equals it (verbatim), else ""
    words: tuple[str, ...]  # the claim's words found in the turn (for highlighting)


_WORD = re.compile(r"\w[\w'@.\-/]*\w|\w", re.UNICODE)


def claim_match(claim: str, turn: str) -> Match:
    """Whether ``claim`` is one whole sentence of ``turn`` that is a statement and
    not quoted; else which of its words the turn holds (shown to a reviewer)."""
    folded = fold(claim)
    if folded:
        for sentence in sentences(turn):
            if sentence.question or sentence.quoted:
                continue
            if fold(sentence.text) == folded:
                return Match(True, sentence.text, ())
    turn_words = {w.casefold() for w in _WORD.findall(fold(turn))}
    found = tuple(dict.fromkeys(w for w in _WORD.findall(folded) if w in turn_words))
    return Match(False, "", found)
