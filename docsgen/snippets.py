"""Shell snippets in the docs, and whether each one runs or only illustrates.

Every ```bash, ```sh, ```shell or ```console fence in docs/ and the README carries a
marker on the line right above it (docs/contributing/docs.md):

    <!-- runnable -->      tests/test_docs_snippets.py runs it against a live server
    <!-- illustrative -->  shows a command the test cannot run (it starts a server,
                           needs another machine, or shows output)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHELL_LANGUAGES = {"bash", "sh", "shell", "console", "zsh"}
MARKER_LINE = r"^[ \t]*<!-- (?:runnable|illustrative) -->[ \t]*\n"
_MARKER = re.compile(r"^\s*<!-- (runnable|illustrative) -->\s*$")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*\{?\s*\.?([\w-]*)")


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    marker: str | None  # "runnable", "illustrative" or None
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def snippets(path: Path) -> list[Snippet]:
    """Every fenced block of ``path`` with its language and marker."""
    lines = path.read_text().split("\n")
    found, i = [], 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, language = match.groups()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        marker = _MARKER.match(lines[start - 1]) if start else None
        found.append(
            Snippet(
                path,
                start + 1,
                language.lower(),
                marker.group(1) if marker else None,
                "\n".join(body),
            )
        )
        i += 1
    return found


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def shell_snippets() -> list[Snippet]:
    return [s for page in pages() for s in snippets(page) if s.language in SHELL_LANGUAGES]
