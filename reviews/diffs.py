"""Unified diffs of effective skills, as lines the templates colour.

A review card compares the effective skill its agent gets now with the one it
would get if the delta were approved. Both are rendered as the agent receives
them: the tool list (what tool-hints change) above the text (what preferences
and examples change), so one diff shows either kind of delta.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace
from itertools import zip_longest

from memory.skills.effective import LEARNED_HEADING

CONTEXT_LINES = 3
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "del", "ctx" or "hunk"
    text: str
    old: int | None = None  # line numbers, where the line exists on that side
    new: int | None = None
    scaffold: bool = False  # the Learned-adjustments block's headings and blank lines

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


def mark_scaffolding(lines: list[DiffLine], *, after: str) -> list[DiffLine]:
    """Mark the ``## Learned adjustments`` block's own headings and blank lines.

    The block is appended after the base, so a one-line delta also adds the
    block's heading, its section heading and blank lines around them; those are
    scaffolding, folded in the card and not counted as changes. ``after`` is the
    text the diff leads to (where the block is looked for: it may lie outside the
    diff's context lines).
    """
    after_lines = after.split("\n")
    start = next((i + 1 for i, text in enumerate(after_lines) if text == LEARNED_HEADING), None)
    if start is None:
        return lines
    marked = []
    for line in lines:
        in_block = line.kind in ("add", "ctx") and line.new is not None and line.new >= start
        scaffold = in_block and (
            line.text.strip() == "" or line.text == LEARNED_HEADING or line.text.startswith("### ")
        )
        # The blank line that separates the block from the base is added with it.
        scaffold = scaffold or (
            line.kind == "add" and line.new == start - 1 and line.text.strip() == ""
        )
        marked.append(replace(line, scaffold=scaffold) if scaffold else line)
    return marked


def diff_blocks(lines: list[DiffLine]) -> list[dict]:
    """Runs of lines for the template: ``{"fold": bool, "lines": [...]}``.

    Runs of scaffolding are folded (a ``<details>`` the reviewer can open).
    """
    blocks: list[dict] = []
    for line in lines:
        if blocks and blocks[-1]["fold"] == line.scaffold:
            blocks[-1]["lines"].append(line)
        else:
            blocks.append({"fold": line.scaffold, "lines": [line]})
    return blocks


def side_by_side(lines: list[DiffLine]) -> list[dict]:
    """The same diff as rows of (old, new): removed lines face the lines that replace them."""
    rows: list[dict] = []
    dels: list[DiffLine] = []
    adds: list[DiffLine] = []

    def flush():
        for old, new in zip_longest(dels, adds):
            rows.append({"hunk": None, "old": old, "new": new})
        dels.clear()
        adds.clear()

    for line in lines:
        if line.kind == "del":
            if adds:
                flush()
            dels.append(line)
        elif line.kind == "add":
            adds.append(line)
        else:
            flush()
            if line.kind == "hunk":
                rows.append({"hunk": line, "old": None, "new": None})
            else:
                rows.append({"hunk": None, "old": line, "new": line})
    flush()
    return rows


def diff_counts(lines: list[DiffLine]) -> dict[str, int]:
    """Added and removed lines, scaffolding not counted."""
    return {
        "added": sum(1 for line in lines if line.kind == "add" and not line.scaffold),
        "removed": sum(1 for line in lines if line.kind == "del" and not line.scaffold),
    }
