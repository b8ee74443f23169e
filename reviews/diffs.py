"""Unified diffs of effective skills, as lines the templates colour.

A review card compares the effective skill its agent gets now with the one it
would get if the delta were approved: the tool list (what tool-hints change)
above the text (what preferences and examples change), so one diff shows
either kind of delta. The agent receives learned lines in a block appended to
the skill; a reviewer reads each one where it applies, inside its own section
after that section's own lines (``sectioned_render``), with the section's
heading on every hunk.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass, replace
from itertools import zip_longest

from memory.skills.effective import LEARNED_HEADING
from memory.skills.skillmd import WHOLE_BODY_SLUG, section_spans

CONTEXT_LINES = 3
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "del", "ctx" or "hunk"
    text: str
    old: int | None = None  # line numbers, where the line exists on that side
    new: int | None = None
    section: str = ""  # on a hunk: the heading of the section its first change lies in

    @property
    def sign(self) -> str:
        return {"add": "+", "del": "−", "ctx": "", "hunk": ""}[self.kind]


def effective_render(effective: dict) -> str:
    """One effective skill as text: its tools in front-matter style, then its body."""
    tools = ", ".join(effective["skill_tools"])
    return f"---\ntools: [{tools}]\n---\n{effective['text']}"


def sectioned_render(effective: dict, *, base_body: str) -> str:
    """An effective skill as a reviewer reads it: each learned line inside its section.

    ``effective["text"]`` is ``base_body`` followed by the ``## Learned adjustments``
    block, one ``### <section title>`` group per anchored section. Each group's
    lines are moved to the end of that section of the base (after its last
    non-blank line, subsections included), so a diff shows them under their own
    heading and beside the lines they adjust. A group whose section is not in the
    base (the whole-body anchor) stays at the end of the body.
    """
    text = effective["text"]
    tools = ", ".join(effective["skill_tools"])
    front = f"---\ntools: [{tools}]\n---\n"
    if not text.startswith(base_body) or LEARNED_HEADING not in text[len(base_body) :]:
        return front + text
    groups: list[tuple[str, list[str]]] = []
    block = text[len(base_body) :].split("\n")
    for line in block[block.index(LEARNED_HEADING) + 1 :]:
        if line.startswith("### "):
            groups.append((line[4:], []))
        elif line.strip() and groups:
            groups[-1][1].append(line)
    lines = base_body.split("\n")
    spans = {span["title"]: span for span in reversed(section_spans(base_body))}
    inserts: dict[int, list[str]] = {}
    for title, learned in groups:
        span = spans.get(title) if title != "Whole skill" else None
        if span is None or span["slug"] == WHOLE_BODY_SLUG:
            at = len(lines)
            while at > 0 and not lines[at - 1].strip():
                at -= 1
        else:
            at = span["end"]
            while at > span["start"] + 1 and not lines[at - 1].strip():
                at -= 1
        inserts.setdefault(at, []).extend(learned)
    placed: list[str] = []
    for index, line in enumerate(lines):
        placed += inserts.pop(index, [])
        placed.append(line)
    for at in sorted(inserts):
        placed += inserts[at]
    return front + "\n".join(placed)


def _enclosing_heading(text: str, line_number: int) -> str:
    """The heading line of the innermost section holding 1-based ``line_number``."""
    lines = text.split("\n")
    index = line_number - 1
    inside = [s for s in section_spans(text) if s["start"] <= index < s["end"] and s["title"]]
    if not inside:
        return ""
    return lines[max(inside, key=lambda s: s["start"])["start"]].strip()


def unified_diff(before: str, after: str, *, context: int = CONTEXT_LINES) -> list[DiffLine]:
    """``difflib.unified_diff`` of two texts, with line numbers; [] when they are equal.

    Each hunk line names the heading of the section its first change is in (as
    git names the enclosing function), so a hunk whose context lines stop short
    of the heading still says where it is.
    """
    lines = _raw_diff(before, after, context=context)
    named = []
    for position, line in enumerate(lines):
        if line.kind == "hunk":
            change = next(
                (x for x in lines[position + 1 :] if x.kind in ("add", "del", "hunk")), None
            )
            if change is not None and change.kind == "add":
                line = replace(line, section=_enclosing_heading(after, change.new))
            elif change is not None and change.kind == "del":
                line = replace(line, section=_enclosing_heading(before, change.old))
        named.append(line)
    return named


def _raw_diff(before: str, after: str, *, context: int) -> list[DiffLine]:
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
    """Added and removed lines."""
    return {
        "added": sum(1 for line in lines if line.kind == "add"),
        "removed": sum(1 for line in lines if line.kind == "del"),
    }


def change_digest(lines: list[DiffLine], *, version: str) -> str:
    """A digest of what a diff changes (its added and removed lines) on ``version``: the
    form posts it back, and an approval is refused if the change is no longer this one.
    Context lines are left out: another line approved elsewhere in the skill moves them
    without changing what this decision does."""
    changed = [[line.kind, line.text] for line in lines if line.kind in ("add", "del")]
    payload = json.dumps([version, changed], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def diff_digest(lines: list[DiffLine]) -> str:
    """A digest of a diff as shown: what a decision records and a form posts back."""
    shown = [[line.kind, line.text, line.old, line.new, line.section] for line in lines]
    return hashlib.sha256(json.dumps(shown, ensure_ascii=False).encode()).hexdigest()
