"""Run every benchmark, each in its own process, and summarise.

``make bench`` runs this with the embedded services up. ``--quick`` runs every
script at its smoke size; arguments after ``--`` go to every script as well.
Each script writes its current result under bench/results/ (one result per
benchmark, overwritten by the next run; history lives in git) and prints its tables.

    .venv/bin/python bench/run_all.py                 # everything, full size
    .venv/bin/python bench/run_all.py --quick         # every script, smoke size
    .venv/bin/python bench/run_all.py outcomes rss    # only those two
    .venv/bin/python bench/run_all.py --list          # what would run, in order
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: Every benchmark, in the order ``make bench`` runs them. A new script goes here
#: (one it finds on disk but not here still runs, last, with a note).
SCRIPTS = [
    # Recall at scale, maintenance, the situation hot path, load with faults.
    "bench_knowledge.py",
    "bench_maintenance.py",
    "bench_situations.py",
    "bench_faults.py",
    "bench_scaleout.py",  # 3 web + 2 workers + 1 beat on one database, with a kill and a restart
    "bench_rows.py",  # memory.core.rows' statements against the ORM doing the same
    # Linear scanning of outside text, and /recall/ under adversarial load.
    "bench_scan.py",
    "bench_load.py",
    # Ingestion, outcomes, worker memory and conversation recall.
    "bench_ingest.py",  # batch remember and batch turns against the raw embedder
    "bench_outcomes.py",  # outcomes/s with 8 clients, against a bare DRF view
    "bench_rss.py",  # worker RSS over 100k server-side embeddings
    "bench_recall.py",  # LoCoMo through /recall/ and /conversations/search/, per variant
    "bench_scale.py",  # recall at 10k, 100k and 1M items (the 1M runs take about an hour)
]


def plan(names: list[str]) -> tuple[list[Path], list[str]]:
    """The scripts to run (listed order, then unlisted ones) and the unlisted names."""
    on_disk = {p.name: p for p in HERE.glob("bench_*.py")}
    listed = [on_disk[name] for name in SCRIPTS if name in on_disk]
    unlisted = sorted(set(on_disk) - set(SCRIPTS))
    scripts = listed + [on_disk[name] for name in unlisted]
    if names:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in names]
    return scripts, unlisted


def main(argv: list[str]) -> int:
    if "--" in argv:
        split = argv.index("--")
        argv, passthrough = argv[:split], argv[split + 1 :]
    else:
        passthrough = []
    flags = [a for a in argv if a.startswith("--")]
    names = [a for a in argv if not a.startswith("--")]
    if "--quick" in flags and "--quick" not in passthrough:
        passthrough.append("--quick")
    scripts, unlisted = plan(names)
    for name in unlisted:
        print(f"note: {name} is not in run_all.SCRIPTS; it runs last", flush=True)
    if "--list" in flags:
        for script in scripts:
            print(" ".join([script.name, *passthrough]))
        return 0
    summary = []
    for script in scripts:
        print(f"\n######## {script.name} {' '.join(passthrough)} ########", flush=True)
        started = time.perf_counter()
        code = subprocess.call([sys.executable, str(script), *passthrough], cwd=HERE.parent)
        summary.append((script.name, code, time.perf_counter() - started))
    print("\n######## summary ########")
    for name, code, seconds in summary:
        print(f"{name:32s} {'ok' if code == 0 else f'FAILED ({code})':12s} {seconds:8.1f}s")
    return 0 if all(code == 0 for _, code, _ in summary) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
