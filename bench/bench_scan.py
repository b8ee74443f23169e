"""Scan time per MB for every pattern run on agent- or tool-written text.

    .venv/bin/python bench/bench_scan.py [--quick]

Every pattern of the situation classifier, the secret walker and the injection
scanner, and the three public entry points (``classify_result``, ``find_secret``,
``injection_scan``), run over each adversarial family of
``tests/memory/core/scan_inputs.py`` (long runs of spaces, newlines and tabs,
repeated keywords, nearly-matching prefixes) at 10 KB, 100 KB and 1 MB. For each
rule the worst family is reported: milliseconds per MB at each size, side by side,
and the exponent k of time ~ size^k fitted from 10 KB to 1 MB (1 is linear, 2
quadratic; memory effects of megabyte-long matches put a linear scan a little
over 1).

Writes ``results/scan.md``, ``results/scan.json`` and ``results/scan.svg``.
No database: the scanners are pure.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

from common import RESULTS, ROOT, table

SIZES = (10_000, 100_000, 1_000_000)
LINEAR_EXPONENT_MAX = 1.3  # time ~ size^k over 10 KB..1 MB: k <= 1.3 (quadratic: 2)


def _setup():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def _time(fn, text: str, budget_s: float, min_calls: int = 3) -> float:
    """Best seconds per call of ``fn(text)`` over at least three calls filling ``budget_s``
    (the best, not the mean: the machine is shared and a neighbour only adds time)."""
    best, spent, calls = float("inf"), 0.0, 0
    while spent < budget_s or calls < min_calls:
        calls += 1
        started = time.perf_counter()
        fn(text)
        took = time.perf_counter() - started
        best, spent = min(best, took), spent + took
    return best


def _exponent(per_mb: list[float]) -> float:
    return math.log((per_mb[-1] * SIZES[-1]) / (per_mb[0] * SIZES[0])) / math.log(
        SIZES[-1] / SIZES[0]
    )


def rules() -> dict[str, object]:
    from memory.core import secrets
    from memory.situations import classify
    from memory.situations.classify import Signals, classify_result
    from memory.skills import injection

    def drain(pattern):
        return lambda text: sum(1 for _ in pattern.finditer(text))

    found = {
        "classify_result (failed call)": lambda t: classify_result(
            Signals(tool="x", exit_code=1, stderr=t, stdout=t, output=t)
        ),
        "find_secret": lambda t: secrets._find_secret_in_forms(t),  # noqa: SLF001 - no cache
        "injection_scan": injection.injection_scan,
    }
    found |= {f"classify: {n}": drain(p) for n, p in classify.TEXT_PATTERNS.items()}
    found |= {f"secrets: {n}": drain(p) for n, p in secrets.SCAN_PATTERNS.items()}
    found |= {f"injection: {n}": drain(p) for n, p in injection.SCAN_PATTERNS.items()}
    return found


def main(argv: list[str]) -> int:
    _setup()
    from tests.memory.core.scan_inputs import FAMILIES, adversarial

    quick = "--quick" in argv
    budget = 0.005 if quick else 0.03
    texts = {(f, n): adversarial(f, n) for f in FAMILIES for n in SIZES}
    rows, raw = [], {}
    for name, fn in rules().items():
        worst = None
        for family in FAMILIES:
            per_mb = [_time(fn, texts[family, n], budget) * 1_000_000 / n for n in SIZES]
            if _exponent(per_mb) > LINEAR_EXPONENT_MAX:
                # The box is shared: a neighbour's burst during one 1 MB call looks like
                # growth. Measure that family again, longer, before believing it.
                per_mb = [_time(fn, texts[family, n], 0.3, min_calls=9) * 1_000_000 / n
                          for n in SIZES]  # fmt: skip
            growth = _exponent(per_mb)
            raw[f"{name} | {family}"] = {
                "ms_per_mb": [x * 1000 for x in per_mb],
                "exponent": growth,
            }
            if worst is None or growth > worst[2]:
                worst = (family, per_mb, growth)
        family, per_mb, growth = worst
        rows.append(
            {
                "rule": name,
                "worst family": family,
                **{
                    f"ms/MB @ {n // 1000} KB": f"{x * 1000:.2f}"
                    for n, x in zip(SIZES, per_mb, strict=True)
                },
                "exponent k": f"{growth:.2f}",
                "linear": "yes" if growth <= LINEAR_EXPONENT_MAX else "NO",
            }
        )
        print(f"{name:45s} {family:26s} " + " ".join(f"{x * 1000:8.2f}" for x in per_mb)
              + f"  k={growth:.2f}", flush=True)  # fmt: skip
    columns = ["rule", "worst family", *[f"ms/MB @ {n // 1000} KB" for n in SIZES],
               "exponent k", "linear"]  # fmt: skip
    nonlinear = [r["rule"] for r in rows if r["linear"] != "yes"]
    md = [
        "# Scan time per MB, every rule (bench/bench_scan.py)",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.2f}{' (quick)' if quick else ''}. Each rule over each "
        f"adversarial family ({len(FAMILIES)}: runs of spaces, newlines, tabs, repeated "
        "keywords, nearly-matching prefixes); per rule the family with the steepest "
        "growth is shown (a family that looked super-linear is timed again, longer, "
        "before it is reported: the machine is shared). Time per MB that stays flat as the input grows is linear; k is "
        "the exponent of time ~ size^k from 10 KB to 1 MB (1 linear, 2 quadratic). The "
        "entry points read at most a head and tail window of each output (classifier) "
        "and so get cheaper per MB as the input grows.",
        "",
        table(rows, columns),
        "",
        f"Rules with k over {LINEAR_EXPONENT_MAX}: {', '.join(nonlinear) or 'none'}.",
        "",
        "![ms per MB by input size](scan.svg)",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scan.md").write_text("\n".join(md))
    (RESULTS / "scan.json").write_text(json.dumps(raw, indent=1))
    (RESULTS / "scan.svg").write_text(_svg(rows))
    print(f"\nwrote {RESULTS / 'scan.md'}; non-linear: {nonlinear or 'none'}")
    return 1 if nonlinear else 0


def _svg(rows: list[dict]) -> str:
    """Milliseconds per MB at each size, one line per rule (the three entry points bold)."""
    w, h, left, top, bottom = 640, 320, 60, 20, 40
    keys = [f"ms/MB @ {n // 1000} KB" for n in SIZES]
    values = [[max(float(r[k]), 0.001) for k in keys] for r in rows]
    high = max(max(v) for v in values) * 1.2
    low = min(min(v) for v in values) / 1.2

    def y(v):
        return top + (h - top - bottom) * (1 - (math.log10(v) - math.log10(low))
                                           / (math.log10(high) - math.log10(low)))  # fmt: skip

    def x(i):
        return left + i * (w - left - 20) / (len(SIZES) - 1)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             'font-family="sans-serif" font-size="11">',
             f'<text x="{left}" y="12">ms per MB (log) by input size: flat = linear</text>']  # fmt: skip
    for i, n in enumerate(SIZES):
        parts.append(f'<text x="{x(i) - 15:.0f}" y="{h - 15}">{n // 1000} KB</text>')
    for decade in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        v = 10**decade
        if low <= v <= high:
            parts.append(f'<line x1="{left}" x2="{w - 20}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                         'stroke="#ddd"/>')  # fmt: skip
            parts.append(f'<text x="5" y="{y(v) + 4:.1f}">{v:g}</text>')
    for row, vals in zip(rows, values, strict=True):
        entry = not row["rule"].count(":")
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(vals))
        parts.append(f'<polyline points="{points}" fill="none" '
                     f'stroke="{"#c33" if entry else "#88a"}" stroke-width="{2.5 if entry else 0.8}">'
                     f'<title>{row["rule"]}</title></polyline>')  # fmt: skip
    parts.append("</svg>")
    return "\n".join(parts)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
