"""Small text helpers every domain shares (one copy each)."""

from __future__ import annotations

import hashlib
import re


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def normalise_whitespace(text: str) -> str:
    return " ".join(text.split())


def estimate_tokens(text: str) -> int:
    """A deliberately simple, model-independent estimate: ceil(chars / 4)."""
    return -(-len(text) // 4)


# A word, as full-text matching and the dedup overlap count them.
WORD = re.compile(r"\w+", re.UNICODE)


def fold_text(text: str) -> str:
    """Text folded for "does this say that" comparisons: casefolded, every run of
    punctuation, symbols or whitespace one space, padded with a space each side so
    a substring test matches whole words only ("no" is not found in "know")."""
    words = WORD.findall(text.casefold().replace("_", " "))
    return f" {' '.join(words)} " if words else ""
