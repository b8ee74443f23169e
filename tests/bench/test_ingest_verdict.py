"""``bench_ingest.short_verdict``: a short-item target is judged only on a quiet
machine, and the fixed cost per item outside the model stands beside the ratio."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_ingest import short_verdict  # noqa: E402

GOOD = {"ratio_to_raw_embedder": 0.74, "ms_per_item_outside_model": 0.95}
BAD = {"ratio_to_raw_embedder": 0.5, "ms_per_item_outside_model": 2.8}


def test_a_busy_machine_judges_no_target_whatever_the_figures():
    for short in (GOOD, BAD):
        for before, after in (((13.2, 9, 8), (12.8, 9, 8)), ((0.4, 0, 0), (2.5, 1, 1))):
            said = short_verdict(short, before, after, 2)
            assert "rerun on a quiet machine" in said
            assert "met" not in said and "missed" not in said


def test_a_quiet_machine_says_met_or_missed_with_the_fixed_cost_beside_the_ratio():
    met = short_verdict(GOOD, (0.3, 0.2, 0.1), (0.9, 0.4, 0.2), 2)
    assert met.endswith("met") and "0.74×" in met and "0.95 ms an item outside the model" in met
    assert "0.30 before, 0.90 after, on 2 cores" in met
    missed = short_verdict(BAD, (0.3, 0.2, 0.1), (0.9, 0.4, 0.2), 2)
    assert missed.endswith("missed") and "2.8 ms" in missed


def test_either_target_alone_is_not_enough():
    ratio_only = {"ratio_to_raw_embedder": 0.8, "ms_per_item_outside_model": 1.5}
    fixed_only = {"ratio_to_raw_embedder": 0.6, "ms_per_item_outside_model": 1.0}
    for short in (ratio_only, fixed_only):
        assert short_verdict(short, (0.1,), (0.1,), 2).endswith("missed")
