"""The scale benchmark's quick run (``bench/bench_scale.py --quick``), end to end.

It loads 1,500 items in one workspace and over 1,000 workspaces, times recall
through the API and measures recall@10 against exact search. Asserted: every
measurement is there, the quick run writes under var/ and leaves the published
results alone, and a scope small enough to be read exactly (1 or 2 items per
workspace) finds exactly the exact answer. Never a latency.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "bench" / "results" / "scale.json"
QUICK = ROOT / "var" / "bench" / "scale-quick"


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def test_the_quick_run_measures_both_layouts_and_leaves_published_results_alone():
    before = _digest(PUBLISHED)
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_scale.py"), "--quick"],
        cwd=ROOT,
        env={**os.environ, "CAIRN_BENCH_DATABASE": "cairn_bench_scale_test"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert _digest(PUBLISHED) == before
    results = json.loads(QUICK.with_suffix(".json").read_text())
    runs = {r["layout"]: r for r in results["runs"]}
    assert set(runs) == {"one", "spread"}
    for run in runs.values():
        assert run["items"] == 1500
        assert run["api_latency"]["n"] == 16
        assert set(run["sql_latency"]) == {
            "both", "vector", "text", "api_incognito", "both_counting", "text_counting"
        }  # fmt: skip
        assert 0.0 <= run["recall_at_10"] <= 1.0
        assert run["build"]["hnsw_mb"] >= 1
        assert set(run["context_filter"]) == {"off", "relaxed_order", "strict_order"}
        assert run["levers"]["held_out"]["default"]["api_latency"]["n"] == 8
    # Two items or fewer per workspace: below CAIRN_RECALL_EXACT_BELOW, read exactly.
    assert runs["spread"]["recall_at_10"] == 1.0
    assert runs["spread"]["exact_scan"]["recall_at_10"] == 1.0
    assert "<svg" in QUICK.with_suffix(".svg").read_text()
    assert "Recall through the API" in QUICK.with_suffix(".md").read_text()
