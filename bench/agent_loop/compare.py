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

from bench.agent_loop.experiment import AGENTDOJO, HELDOUT, POLICIES, VARIANTS  # noqa: E402
from bench.agent_loop.report import fmt, seed_counts  # noqa: E402

SHOWN = ("injection", "exposure", "attack_success", "attack_stopped_at_check",
         "poison_served_as_earned", "success_rate", "late_failed_steps_per_task",
         "false_asks_per_100")  # fmt: skip
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
        "never used to tune them). AgentDojo: its injection templates around four coding "
        "goals (`attacks_agentdojo.py`; nobody on the project wrote them). Means with 95% "
        "intervals over seeds (t).",
        "",
        *seed_counts(result),
        "| policy | metric | dev | held-out | agentdojo |",
        "|---|---|---|---|---|",
    ]
    for base in bases:
        if base == "recency" and f"{base}@heldout" not in policies:
            continue
        for metric in SHOWN:
            dev = policies[base]["intervals"][metric]
            held = policies.get(f"{base}@heldout", {}).get("intervals", {}).get(metric, MISSING)
            dojo = policies.get(f"{base}@agentdojo", {}).get("intervals", {}).get(metric, MISSING)
            lines.append(f"| {base} | {metric} | {fmt(dev)} | {fmt(held)} | {fmt(dojo)} |")
    return "\n".join(lines) + "\n"


ORDER = POLICIES + VARIANTS + HELDOUT + AGENTDOJO  # every policy name the run knows, in table order


def merge(results: list[dict]) -> dict:
    """One result from runs of the same command split by policy or by seed (same
    parameters; each policy and seed is independent of the others, so the numbers are
    the ones a single run gives). Wall time: the longest part (they ran in parallel)."""
    from dataclasses import fields

    from bench.agent_loop.agent import AgentParams
    from bench.agent_loop.experiment import RunParams, summarize

    params = results[0]["params"]
    if any(r["params"] != params for r in results):
        raise SystemExit("merge: the runs differ in their parameters")
    rows = {(r["policy"], r["seed"]): r for result in results for r in result["rows"]}
    names = {name for name, _ in rows}
    policies = [n for n in ORDER if n in names] + sorted(names - set(ORDER))
    rp = RunParams(**{f.name: params[f.name] for f in fields(RunParams)})
    ap = AgentParams(**{f.name: params[f.name] for f in fields(AgentParams)})
    merged = summarize(list(rows.values()), rp, ap, policies)
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
