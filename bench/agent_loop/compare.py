"""Dev vs held-out attacks, side by side, from one agent-loop run's JSON.

    .venv/bin/python bench/agent_loop/compare.py bench/results/agent_loop.json

Writes bench/results/agent_loop_attacks.md: injection, exposure, attack success and
the attacks the decision-time check stopped, per policy on the dev attack set (seen
when Cairn's injection rules were written) and on the held-out set (never seen, see
attacks_heldout.py), with 95% intervals over seeds. Only policies present in the run
appear; a policy without an ``@heldout`` twin in the run gets "–" there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.agent_loop.report import fmt  # noqa: E402

SHOWN = ("injection", "exposure", "attack_success", "attack_stopped_at_check",
         "poison_served_as_earned")  # fmt: skip
MISSING = {"mean": None}


def table(result: dict) -> str:
    policies = result["policies"]
    bases = [name for name in policies if "@" not in name]
    p = result["params"]
    lines = [
        "# Agent loop: dev vs held-out attacks",
        "",
        f"{result['seeds']} seeds × {p['episodes']} episodes × {p['families']} task families, "
        f"attack from episode {p['attack_from'] + 1}; g={p['g']} m={p['m']}. Dev: the six "
        "texts in `world.ATTACKS` (Cairn's injection rules were written after seeing them). "
        "Held-out: the twelve in `attacks_heldout.py` (written without reading the rules; "
        "never used to tune them). Means with 95% intervals over seeds (t).",
        "",
        "| policy | metric | dev | held-out |",
        "|---|---|---|---|",
    ]
    for base in bases:
        if base == "recency" and f"{base}@heldout" not in policies:
            continue
        for metric in SHOWN:
            dev = policies[base]["intervals"][metric]
            held = policies.get(f"{base}@heldout", {}).get("intervals", {}).get(metric, MISSING)
            lines.append(f"| {base} | {metric} | {fmt(dev)} | {fmt(held)} |")
    return "\n".join(lines) + "\n"


def merge(results: list[dict]) -> dict:
    """One result from runs of the same command split by policy (same seeds and
    parameters; each policy and seed is independent of the others, so the numbers are
    the ones a single run gives). Wall time: the longest part (they ran in parallel)."""
    first = results[0]
    for other in results[1:]:
        if other["seeds"] != first["seeds"] or other["params"] != first["params"]:
            raise SystemExit("merge: the runs differ in seeds or parameters")
    merged = {**first, "policies": {}}
    for result in results:
        merged["policies"].update(result["policies"])
    merged["wall_s"] = max(r.get("wall_s", 0) for r in results)
    return merged


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("json", nargs="?", default=str(ROOT / "bench/results/agent_loop.json"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/agent_loop_attacks.md"))
    ap.add_argument("--merge", nargs="+", default=None,
                    help="first merge these partial runs into JSON (and its .md/.svg)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.merge:
        from bench.agent_loop.run import write

        merged = merge([json.loads(Path(f).read_text()) for f in args.merge])
        prefix = args.json.removesuffix(".json")
        write(argparse.Namespace(json=None, out=prefix), merged, merged["wall_s"])
    text = table(json.loads(Path(args.json).read_text()))
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
