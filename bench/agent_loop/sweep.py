"""Sweep the agent's fallibility: f, w and g one at a time around the default.

    .venv/bin/python bench/agent_loop/sweep.py --seeds 3 --episodes 20 --families 32

Writes bench/results/agent_loop_sweep.md and .json (self_report beside cairn, and
none as the floor): failed steps per task, attack success, wrong-lesson persistence.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for p in (ROOT, ROOT / "bench", ROOT / "clients" / "python" / "src"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from bench.agent_loop.agent import AgentParams  # noqa: E402
from bench.agent_loop.experiment import RunParams, run  # noqa: E402
from bench.agent_loop.report import fmt  # noqa: E402
from bench.agent_loop.run import django_provisioner  # noqa: E402

GRID = {"f": (0.0, 0.6), "w": (0.0, 0.5), "g": (0.2, 0.8)}
SHOWN = ("failed_steps_per_task", "attack_success", "wrong_lesson_persistence")


def main(argv=None) -> int:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--families", type=int, default=32)
    ap.add_argument("--policies", default="none,self_report,cairn")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "agent_loop_sweep"))
    args = ap.parse_args(argv)
    from common import drop_database, free_port, gunicorn_start, setup_django

    setup_django()
    server, url = gunicorn_start(free_port(), settings="server_settings")
    started = time.monotonic()
    rows = []
    try:
        rp = RunParams(seeds=args.seeds, episodes=args.episodes, families=args.families,
                       late_from=args.episodes // 3 + 1)  # fmt: skip
        for param, values in GRID.items():
            for value in values:
                ap_ = replace(AgentParams(), **{param: value})
                result = run(rp, ap_, django_provisioner(url), policies=args.policies.split(","),
                             log=lambda s: print(s, file=sys.stderr, flush=True))  # fmt: skip
                rows.append({"param": param, "value": value, "result": result})
                Path(f"{args.out}.json").write_text(json.dumps(rows, indent=1))
    finally:
        server.terminate()
        server.wait(timeout=30)
        drop_database()
    lines = [
        "# Agent loop: fallibility sweep",
        "",
        f"{args.seeds} seeds × {args.episodes} episodes × {args.families} families; one "
        "parameter moved at a time from f=0.3 w=0.2 g=0.5; 95% intervals over seeds; "
        f"wall time {time.monotonic() - started:.0f} s.",
        "",
        "| setting | metric | " + " | ".join(args.policies.split(",")) + " |",
        "|---|---|" + "---|" * len(args.policies.split(",")),
    ]
    for row in rows:
        for metric in SHOWN:
            cells = [fmt(v["intervals"][metric]) for v in row["result"]["policies"].values()]
            lines.append(
                f"| {row['param']}={row['value']} | {metric} | " + " | ".join(cells) + " |"
            )
    Path(f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
