"""In how many families can the key lesson form with the shipped extraction?

For each family, the turn an agent has when the pitfall bites: the naive command
fails, then the good one works (and, on a family the change touches, the good one
fails and the alternative works). Each command is named by the shipped hook's own
extraction (``cairn_client.opkeys``, through ``Approach.key``) and the turn is read by
the server's own rule (``memory.lessons.verdict.mechanical_pairs``): the key lesson
can form when that rule pairs the two commands on one target.

    .venv/bin/python bench/agent_loop/key_lessons.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for p in (ROOT, ROOT / "clients" / "python" / "src"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def turn(failed, ok) -> list[dict]:
    """The approach a harness reports for "``failed`` failed, then ``ok`` worked"."""
    return [
        {"operation_key": a.op, "target": a.target, "outcome": outcome, "step": n}
        for n, (a, outcome) in enumerate(((failed, "failed"), (ok, "ok")), 1)
    ]


def forms(failed, ok) -> bool:
    from memory.lessons.verdict import mechanical_pairs

    return (failed.op, ok.op, ok.target) in mechanical_pairs(turn(failed, ok))


def key_lessons() -> list[dict]:
    """One row per family: its commands' keys and whether each lesson can form."""
    from bench.agent_loop.world import build_families

    rows = []
    for fam in build_families():
        rows.append(
            {
                "family": fam.name,
                "naive": fam.naive.key,
                "good": fam.good.key,
                "alt": fam.alt.key,
                "key_lesson": forms(fam.naive, fam.good),
                "recovery_lesson": forms(fam.good, fam.alt) if fam.changes else None,
            }
        )
    return rows


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
    import django

    django.setup()
    rows = key_lessons()
    print("| family | naive | good | key lesson | recovery lesson |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        recovery = {None: "", True: "yes", False: "no"}[r["recovery_lesson"]]
        print(
            f"| {r['family']} | `{r['naive'][0]}` on `{r['naive'][1]}` | "
            f"`{r['good'][0]}` on `{r['good'][1]}` | {'yes' if r['key_lesson'] else 'no'} | "
            f"{recovery} |"
        )
    formed = sum(r["key_lesson"] for r in rows)
    print(f"\nkey lesson can form in {formed} of {len(rows)} families")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
