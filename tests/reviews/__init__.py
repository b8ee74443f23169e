"""Review UI view tests."""

import re

_WS = re.compile(r"\?ws=[\w.%-]+(?=[\"#])")


def without_ws(html: str) -> str:
    """``html`` with the ``?ws=<workspace>`` every shareable link carries taken out, for
    tests about where a link points (tests/reviews/test_workspace_links.py covers ws)."""
    return _WS.sub("", html)
