"""Every Cairn process (web, worker, beat, manage.py) runs numpy's BLAS on one
thread unless the operator says otherwise: importing ``cairn`` sets it before numpy
loads (see cairn/__init__.py for the measurement behind it)."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = """
import cairn, ctypes, glob, os, numpy
lib = glob.glob(os.path.join(os.path.dirname(numpy.__file__), "..", "numpy.libs", "*openblas*"))
blas = ctypes.CDLL(lib[0])
count = None
for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
             "openblas_get_num_threads"):
    try:
        count = getattr(blas, name)()
        break
    except AttributeError:
        continue
print(count)
"""


def _threads(**env) -> int:
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    return int(done.stdout.strip().splitlines()[-1])


def test_it_runs_blas_on_one_thread_by_default():
    assert _threads() == 1


def test_an_operators_setting_wins():
    assert _threads(OPENBLAS_NUM_THREADS="2") == 2
