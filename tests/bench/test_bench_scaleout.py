"""The scale-out run, short: three web processes, two workers and one beat against one
database, a worker killed mid-job and a web process restarted. Asserts the invariants
the full run reports (nothing lost or doubled, every task message finished once, each
beat tick once, no advisory-lock overlap, no 5xx), never its numbers.

The script starts its own processes on its own bench database and broker db, as
``make bench`` does; it writes its report into a temporary directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_loses_doubles_and_repeats_nothing_with_a_worker_killed_and_a_web_restarted(
    tmp_path,
):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["CAIRN_BENCH_DATABASE"] = "cairn_bench_scaleout_test"
    done = subprocess.run(
        [sys.executable, "bench/bench_scaleout.py", "--seconds", "60", "--rate", "12"]
        + ["--results", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert (tmp_path / "scaleout.json").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "scaleout.json").read_text())
    for kind, writes in result["writes"].items():
        assert writes["acknowledged"] > 0, kind
        assert writes["lost"] == 0 and writes["doubled"] == 0, (kind, writes)
    # The kill and the restart happened, and the killed worker's job ran again once.
    what = [f["what"] for f in result["faults"]]
    assert what[0].startswith("SIGKILL worker") and what[-1] == "web2 answering again", what
    tasks = result["tasks"]
    assert tasks["never_finished"] == 0 and tasks["finished_twice"] == 0, tasks
    if "(mid idle)" not in what[0]:
        assert tasks["run_again_after_kill"] >= 1, tasks
    assert result["job_runs_left_open"] == 0
    assert result["job_runs_finished_twice_per_message"] == 0
    assert result["beat_ticks"] >= 10
    assert all(b["finished_once"] == b["ticks"] for b in result["beat"].values()), result["beat"]
    assert result["locks"]["holds"] > 0 and result["locks"]["overlaps"] == 0
    assert result["server_errors"] == 0, result["http_status"]
    assert result["ok"] is True
    assert done.returncode == 0, done.stdout[-3000:]
