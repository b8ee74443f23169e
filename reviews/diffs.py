"""Unified diffs of effective skills, as lines the templates colour.

A review card compares the effective skill its agent gets now with the one it
would get if the delta were approved. Both are rendered as the agent receives
them: the tool list (what tool-hints change) above the text (what preferences
and examples change), so one diff shows either kind of delta.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

CONTEXT_LINES = 3
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "del", "ctx" or "hunk"
    text: str
    old: int | None = None  # line numbers, where the line exists on that side
    new: int | None = None

    @property
    def sign(self) -> str:
        return {"add": "+", "del": "−", "ctx": "", "hunk": ""}[self.kind]


def effective_render(effective: dict) -> str:
    """One effective skill as text: its tools in front-matter style, then its body."""
    tools = ", ".join(effective["skill_tools"])
    return f"---\ntools: [{tools}]\n---\n{effective['text']}"


def unified_diff(before: str, after: str, *, context: int = CONTEXT_LINES) -> list[DiffLine]:
    """``difflib.unified_diff`` of two texts, with line numbers; [] when they are equal."""
    raw = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=context)
    lines: list[DiffLine] = []
    old = new = 0
    for line in raw:
        if line.startswith(("---", "+++")) and not lines:
            continue  # the file header: both sides are the same skill
        match = _HUNK.match(line)
        if match:
            old, new = int(match.group(1)), int(match.group(2))
            lines.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            lines.append(DiffLine("add", line[1:], new=new))
            new += 1
        elif line.startswith("-"):
            lines.append(DiffLine("del", line[1:], old=old))
            old += 1
        else:
            lines.append(DiffLine("ctx", line[1:], old=old, new=new))
            old += 1
            new += 1
    return lines


def diff_counts(lines: list[DiffLine]) -> dict[str, int]:
    return {
        "added": sum(1 for line in lines if line.kind == "add"),
        "removed": sum(1 for line in lines if line.kind == "del"),
    }
