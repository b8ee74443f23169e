"""The scale-out run's report: ``results/scaleout.md`` and the chart ``scaleout.svg``.

Not a benchmark itself (no ``bench_`` prefix), so ``run_all.py`` does not run it.
"""

from __future__ import annotations

from pathlib import Path

from common import table


def write_report(result: dict, results: Path) -> str:
    (results / "scaleout.svg").write_text(svg(result))
    md = markdown(result)
    (results / "scaleout.md").write_text(md)
    return md


def markdown(r: dict) -> str:
    w = r["writes"]
    acknowledged = sum(v["acknowledged"] for v in w.values())
    lost = sum(v["lost"] for v in w.values())
    doubled = sum(v["doubled"] for v in w.values())
    t, locks = r["tasks"], r["locks"]
    lines = [
        f"# Many processes, one database ({r['seconds']} s at {r['rate_per_s']:g}/s)",
        "",
        "Three web processes (one gunicorn worker, 4 threads each, own ports), two Celery "
        "workers (concurrency 1) and one beat against one PostgreSQL and one broker.",
        "",
        f"**{'All checks hold' if r['ok'] else 'A CHECK FAILED'}.** "
        f"Writes: {acknowledged} acknowledged, {lost} lost, {doubled} doubled. "
        f"Task messages: {t['sent']} sent, {t['never_finished']} never finished, "
        f"{t['finished_twice']} finished twice, {t['run_again_after_kill']} run again after "
        f"the kill ({', '.join(t['rerun_tasks']) or 'none'}; started again "
        f"{', '.join(f'{x} s' for x in t.get('rerun_after_s', [])) or '-'} after its first "
        f"start). Beat: {r['beat_ticks']} ticks, "
        f"each finished once: {all(b['finished_once'] == b['ticks'] for b in r['beat'].values())}. "
        f"Advisory locks: {locks['holds']} holds of {locks['names']} names, "
        f"{locks['overlaps']} overlaps ({locks['cut_by_kill']} cut by the kill). "
        f"5xx: {r['server_errors']} of {r['requests']} answers; connections refused and "
        f"retried on another port: {r['connections_refused_retried']}.",
        "",
        "Faults: " + "; ".join(f"{f['what']} at {f['at_s']} s" for f in r["faults"]) + ".",
        "",
        "## Writes",
        "",
        table(
            [{"kind": k, **v} for k, v in w.items()], ["kind", "acknowledged", "lost", "doubled"]
        ),
        "",
        "## Latency of 2xx answers",
        "",
        table(
            [{"kind": k, **v} for k, v in r["latency"].items()],
            ["kind", "n", "p50_ms", "p95_ms", "mean_ms"],
        ),
        "",
        "## Beat ticks",
        "",
        table(
            [{"entry": k, **v} for k, v in r["beat"].items()],
            ["entry", "ticks", "finished_once", "min_gap_s"],
        ),
        "",
        f"Job runs recorded: {r['job_runs']}; left queued or running: "
        f"{r['job_runs_left_open']}; one message finished by two runs: "
        f"{r['job_runs_finished_twice_per_message']}; runs cut by the kill: "
        f"{r['killed_runs']}. Failed runs other than those: "
        f"{'; '.join(r['failed_runs']) or 'none'}.",
        "",
        f"Broker visibility timeout for this run: {r['visibility_timeout_s']} s. "
        f"Traffic {r['traffic_s']} s, then {r['drain_s']} s until every message finished.",
        "",
        "![Answers and p95 latency per 5 s](scaleout.svg)",
        "",
        f"Machine: {r['machine']}",
    ]
    return "\n".join(lines) + "\n"


def svg(r: dict) -> str:
    """2xx answers per 5 s (bars) and their p95 latency (line), faults marked."""
    rows = r["timeline"]
    width, height, left, top, plot_w, plot_h = 780, 360, 60, 50, 640, 250
    span = max((row["t"] for row in rows), default=0) + 5 or 5
    peak = max((row["ok"] + row["other"] for row in rows), default=1) or 1
    p95 = max((row["p95_ms"] for row in rows), default=1) or 1
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="{left}" y="20" font-weight="bold">Answers per 5 s (bars: 2xx grey, '
        "other red) and p95 latency of 2xx (blue line)</text>",
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#333"/>',
    ]
    bar = plot_w * 5 / span
    for row in rows:
        x = left + plot_w * row["t"] / span
        ok_h = plot_h * row["ok"] / peak
        other_h = plot_h * row["other"] / peak
        out.append(
            f'<rect x="{x:.1f}" y="{top + plot_h - ok_h:.1f}" width="{bar * 0.85:.1f}" '
            f'height="{ok_h:.1f}" fill="#bbb"/>'
        )
        if other_h:
            out.append(
                f'<rect x="{x:.1f}" y="{top + plot_h - ok_h - other_h:.1f}" '
                f'width="{bar * 0.85:.1f}" height="{other_h:.1f}" fill="#c0392b"/>'
            )
    points = " ".join(
        f"{left + plot_w * (row['t'] + 2.5) / span:.1f},"
        f"{top + plot_h - plot_h * row['p95_ms'] / p95:.1f}"
        for row in rows
    )
    out.append(f'<polyline points="{points}" fill="none" stroke="#2471a3" stroke-width="2"/>')
    for frac in (0, 0.5, 1):
        y = top + plot_h - plot_h * frac
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.0f}" text-anchor="end">{peak * frac:.0f}</text>'
        )
        out.append(
            f'<text x="{left + plot_w + 6}" y="{y + 4:.0f}" fill="#2471a3">'
            f"{p95 * frac:.0f} ms</text>"
        )
    for n, fault in enumerate(r["faults"]):
        x = left + plot_w * fault["at_s"] / span
        out.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" '
            'stroke="#7d3c98" stroke-dasharray="4 3"/>'
        )
        out.append(
            f'<text x="{x + 3:.1f}" y="{top + 12 + 13 * n}" fill="#7d3c98" '
            f'font-size="11">{fault["what"]}</text>'
        )
    for frac in (0, 0.25, 0.5, 0.75, 1):
        x = left + plot_w * frac
        out.append(
            f'<text x="{x:.0f}" y="{top + plot_h + 16}" text-anchor="middle">'
            f"{span * frac:.0f} s</text>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
