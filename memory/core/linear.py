"""Linear-time matching for text that comes from outside (agents, tools, imports).

Python's ``re`` backtracks: a pattern such as ``agent\\s*,?\\s+must`` takes time
quadratic in a run of spaces, and one request can hold a worker for seconds. Every
pattern run on agent- or tool-written text is compiled here with RE2 (google-re2),
which matches in time linear in the text whatever the pattern. RE2 has no
look-around and no back-references; patterns that need a boundary consume it as a
character class (``(?:^|[^A-Za-z0-9])``).
"""

from __future__ import annotations

import re2

Pattern = re2._Regexp  # the compiled type, for annotations

compile = re2.compile  # noqa: A001 - the one way to build a pattern here


def scannable(text: str) -> str:
    """``text`` as RE2 can read it: lone surrogates (which UTF-8 cannot hold; the
    HTTP guard refuses them, so only a Python-side caller can pass one) become "?"."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text
