"""Run every benchmark: each ``bench/bench_*.py`` in turn, in its own process.

``make bench`` runs this with the embedded services up. Arguments after ``--``
go to every script (e.g. ``--quick``). Each script writes its own results under
bench/results/ and prints its tables; this prints a summary of what ran.

    .venv/bin/python bench/run_all.py                 # everything, full size
    .venv/bin/python bench/run_all.py -- --quick      # smaller sizes, fewer queries
    .venv/bin/python bench/run_all.py knowledge       # only bench_knowledge.py
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    if "--" in argv:
        split = argv.index("--")
        names, passthrough = argv[:split], argv[split + 1 :]
    else:
        names, passthrough = argv, []
    scripts = sorted(HERE.glob("bench_*.py"))
    if names:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in names]
    summary = []
    for script in scripts:
        print(f"\n######## {script.name} ########", flush=True)
        started = time.perf_counter()
        code = subprocess.call([sys.executable, str(script), *passthrough], cwd=HERE.parent)
        summary.append((script.name, code, time.perf_counter() - started))
    print("\n######## summary ########")
    for name, code, seconds in summary:
        print(f"{name:32s} {'ok' if code == 0 else f'FAILED ({code})':12s} {seconds:8.1f}s")
    return 0 if all(code == 0 for _, code, _ in summary) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
