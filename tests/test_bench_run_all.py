"""bench/run_all.py (``make bench``): every benchmark is listed, and each takes --quick.

Running the benches themselves takes minutes (each sets up a database and a
gunicorn), so this checks the plan (``--list``), not the numbers.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _run_all():
    spec = importlib.util.spec_from_file_location("bench_run_all", BENCH / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_bench_script_is_listed_and_takes_quick():
    run_all = _run_all()
    on_disk = sorted(p.name for p in BENCH.glob("bench_*.py"))
    assert sorted(set(run_all.SCRIPTS) & set(on_disk)) == on_disk, "add it to run_all.SCRIPTS"
    for name in on_disk:
        assert "--quick" in (BENCH / name).read_text(), f"{name} has no --quick"
    assert {"bench_ingest.py", "bench_outcomes.py", "bench_rss.py"} <= set(run_all.SCRIPTS)


def test_list_quick_prints_the_plan_without_running_anything():
    done = subprocess.run(
        [sys.executable, str(BENCH / "run_all.py"), "--list", "--quick", "outcomes", "rss"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["bench_outcomes.py --quick", "bench_rss.py --quick"]
