"""Find the marks an empty template variable leaves in a page's text.

``It is {{ lesson.status }}.`` with no such attribute reads "It is ."; ``by {{ x }}``
reads "by ."; ``({{ n }})`` reads "()". The check reads the text a person sees (tags,
scripts and styles dropped, whitespace collapsed) and looks for a small word that
must be followed by something, followed at once by punctuation or nothing, and for
empty brackets and quotes. It knows no template: any page can be checked.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

# Words after which an English sentence cannot stop.
_DANGLING = (
    "is|are|was|were|be|by|in|of|for|the|a|an|to|from|at|with|into|as|than|and|or|"
    "it's|named|called|since|until|last|on"
)
HOLES = [
    re.compile(rf"(?i)\b(?:{_DANGLING})\s*[.,;:!?)]"),
    re.compile(r"\(\s*\)|\[\s*\]|“\s*”|\"\s*\"|‘\s*’"),
    re.compile(r"#(?=\s|$|[.,;:])"),
    re.compile(r"\bNone\b"),
]


# Not prose: scripts, styles, and quoted blocks (a diff, a form's text) whose words are data.
_HIDDEN = ("script", "style", "template", "textarea", "pre", "select")


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in _HIDDEN:
            self._skip += 1
        elif tag in ("p", "li", "td", "th", "dd", "dt", "h1", "h2", "h3", "div", "br", "tr"):
            self.chunks.append("\n")

    def handle_endtag(self, tag):
        if tag in _HIDDEN:
            self._skip = max(0, self._skip - 1)
            self.chunks.append(" … ")  # a block of quoted text stands for a word
        elif tag in ("p", "li", "td", "th", "dd", "dt", "h1", "h2", "h3", "div", "tr"):
            self.chunks.append("\n")

    def handle_data(self, data):
        if not self._skip:
            self.chunks.append(data)


def visible_lines(html: str) -> list[str]:
    parser = _Text()
    parser.feed(html)
    text = "".join(parser.chunks)
    return [" ".join(line.split()) for line in text.split("\n") if line.strip()]


def text_holes(html: str) -> list[str]:
    """The lines of ``html``'s visible text that show an empty variable's mark."""
    return [line for line in visible_lines(html) if any(p.search(line) for p in HOLES)]
