"""Review UI view tests."""

import re

# ?ws=<name> alone, ?ws=<name>& before more of the query, or &ws=<name> (raw or &amp;).
_WS_FIRST = re.compile(r"\?ws=[^\"'#&\s>]+(?:&amp;|&)")
_WS = re.compile(r"(?:\?|&amp;|&)ws=[^\"'#&\s>]+")
_WS_FIELD = re.compile(r'<input type="hidden" name="ws" value="[^"]*">')


def without_ws(html: str) -> str:
    """``html`` with the ``ws=<workspace>`` every internal link carries taken out (and the
    hidden ``ws`` field of GET forms), for tests about where a link points
    (tests/reviews/test_every_link_names_its_workspace.py covers ws)."""
    return _WS_FIELD.sub("", _WS.sub("", _WS_FIRST.sub("?", html)))
