"""Run the agent-loop benchmark: four memory policies on the same seeds.

    # against a running Cairn (CAIRN_URL); workspaces, agents and tokens are made
    # through Django services on the database that server uses (no API creates them)
    .venv/bin/python bench/agent_loop/run.py --quick --json /tmp/loop.json

    # the full run against the embedded stack: `make bench-loop`
    .venv/bin/python bench/agent_loop/run.py --serve --seeds 20 --episodes 30

See docs/benchmarks/agent-loop.md for every assumption.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for p in (ROOT, ROOT / "bench", ROOT / "clients" / "python" / "src"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from bench.agent_loop.agent import AgentParams  # noqa: E402
from bench.agent_loop.experiment import RunParams, run  # noqa: E402
from bench.agent_loop.report import markdown, svg  # noqa: E402

QUICK = {"seeds": 3, "episodes": 8, "families": 12, "late_from": 4}


def django_provisioner(url: str):
    """Make a workspace, an agent, and its agent + harness tokens (Django services)."""
    from memory.identity.services import agent_get_or_create, token_issue, workspace_get_or_create
    from memory.models import TokenScope

    def provision(name: str) -> dict:
        workspace = workspace_get_or_create(name=name)
        agent = agent_get_or_create(workspace=workspace, name="loop-agent")
        return {
            "url": url,
            "agent_token": token_issue(agent=agent).raw,
            "harness_token": token_issue(agent=agent, scope=TokenScope.HARNESS).raw,
            "machine": f"m-{name}"[:60],
        }

    return provision


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 seeds, 8 episodes, 12 families")
    ap.add_argument("--json", help="write the result JSON here")
    ap.add_argument("--serve", action="store_true",
                    help="start gunicorn on the bench database (for make bench-loop)")  # fmt: skip
    ap.add_argument("--out", default=None, help="write <out>.md and <out>.svg (results)")
    for name, default in vars(RunParams()).items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    for name, default in vars(AgentParams()).items():
        kind = int if isinstance(default, int) else float
        ap.add_argument(f"--{name.replace('_', '-')}", type=kind, default=default)
    ap.add_argument("--policies", default="none,recency,self_report,cairn")
    ap.add_argument("--seed-offset", type=int, default=0,
                    help="with --seed-stride: run seeds offset, offset+stride, ... only")  # fmt: skip
    ap.add_argument("--seed-stride", type=int, default=1)
    args = ap.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            if getattr(args, key) == getattr(RunParams(), key):
                setattr(args, key, value)
    return args


def main(argv=None) -> int:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    args = parse(argv)
    rp = RunParams(**{k: getattr(args, k) for k in vars(RunParams())})
    ap = AgentParams(**{k: getattr(args, k) for k in vars(AgentParams())})
    server = None
    if args.serve:
        from common import free_port, gunicorn_start, setup_django

        setup_django()
        server, url = gunicorn_start(free_port(), settings="server_settings")
    else:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
        import django

        django.setup()
        url = os.environ.get("CAIRN_URL", "http://localhost:8000")
    started = time.monotonic()
    try:
        result = run(rp, ap, django_provisioner(url), policies=args.policies.split(","),
                     log=lambda s: print(s, file=sys.stderr, flush=True),
                     seed_list=range(args.seed_offset, rp.seeds, args.seed_stride),
                     on_seed=lambda partial: write(args, partial, time.monotonic() - started))  # fmt: skip
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
            from common import drop_database

            drop_database()  # the bench database is the run's own, like every bench
    wall = time.monotonic() - started
    write(args, result, wall)
    print(markdown(result, title="Agent loop", wall_s=wall))
    return 0


def write(args, result: dict, wall: float) -> None:
    result["wall_s"] = round(wall, 1)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.out:
        title = "Agent loop: task success over episodes (95% band over seeds)"
        Path(f"{args.out}.md").write_text(markdown(result, title="Agent loop", wall_s=wall))
        Path(f"{args.out}.json").write_text(json.dumps(result, indent=1))
        Path(f"{args.out}.svg").write_text(svg(result, title=title))
        steps_title = "Agent loop: failed steps per task over episodes (95% band over seeds)"
        Path(f"{args.out}-steps.svg").write_text(
            svg(
                result, title=steps_title, key="steps_curve", label="failed steps per task", top=2.0
            )  # fmt: skip
        )


if __name__ == "__main__":
    raise SystemExit(main())
