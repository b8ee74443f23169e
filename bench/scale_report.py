"""Tables and the chart of bench/bench_scale.py's results (cost against size)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import common

COLOURS = {"one": "#4c78a8", "spread": "#f58518"}


def _tidy(rows: list[dict]) -> list[dict]:
    """Milliseconds to one decimal, recall to three."""
    for row in rows:
        for key, value in row.items():
            if isinstance(value, float):
                row[key] = f"{value:.3f}" if "recall" in key else f"{value:.1f}"
    return rows


def _p50(stats: dict) -> float | str:
    return stats.get("p50_ms", "") if stats else ""


def _change(change: dict) -> str:
    if not change:
        return "defaults"
    return ", ".join(f"{k.removeprefix('CAIRN_RECALL_').lower()}={v}" for k, v in change.items())


def targets(runs: list[dict]) -> list[dict]:
    """The issue's targets, per layout: p50 at 1M over p50 at 100k, recall@10 at 1M."""
    rows = []
    by = {(r["items"], r["layout"]): r for r in runs}
    for layout in sorted({r["layout"] for r in runs}):
        big, mid = by.get((1_000_000, layout)), by.get((100_000, layout))
        if big and mid:
            ratio = big["api_latency"]["p50_ms"] / mid["api_latency"]["p50_ms"]
            rows.append({"layout": layout, "target": "recall p50 at 1M <= 2x at 100k",
                         "measured": f"{ratio:.2f}x", "holds": "yes" if ratio <= 2 else "no"})  # fmt: skip
        if big:
            recall = big["recall_at_10"]
            rows.append({"layout": layout, "target": "recall@10 at 1M >= 0.95",
                         "measured": f"{recall:.3f}", "holds": "yes" if recall >= 0.95 else "no"})  # fmt: skip
    return rows


def _section(title: str, rows: list[dict]) -> list[str]:
    """A titled table of ``rows`` (tidied), then a blank line."""
    return [title, common.table(_tidy(rows), list(rows[0]) if rows else []), ""]


def markdown(results: dict) -> str:
    runs = results.get("runs", [])
    lines = []
    rows = [{"items": f"{r['items']:,}", "layout": r["layout"],
             "copy s": r["build"]["copy_s"], "GIN build s": r["build"]["gin_build_s"],
             "HNSW build s": r["build"]["hnsw_build_s"], "HNSW MB": r["build"]["hnsw_mb"],
             "GIN MB": r["build"]["gin_mb"], "table MB": r["build"]["table_mb"]}
            for r in runs]  # fmt: skip
    lines += _section("Load and index build", rows)
    rows = []
    for r in runs:
        s = r["sql_latency"]
        rows.append({"items": f"{r['items']:,}", "layout": r["layout"],
                     "items/workspace": f"{r['items_per_workspace']:,}",
                     "API p50 ms": r["api_latency"]["p50_ms"], "API p95 ms": r["api_latency"]["p95_ms"],
                     "API incognito p50": _p50(s.get("api_incognito", {})),
                     "SQL both p50": _p50(s["both"]), "vector only p50": _p50(s["vector"]),
                     "text only p50": _p50(s["text"]), "recall@10": r["recall_at_10"],
                     "exact scan p50": _p50(r["exact_scan"]["latency"])})  # fmt: skip
    lines += _section("Recall through the API, and its halves (ms)", rows)
    rows = []
    for r in runs:
        e = r["explain_median"]
        c = e["cte_ms"]
        rows.append({"items": f"{r['items']:,}", "layout": r["layout"], "execution": e["execution_ms"],
                     "planning": e["planning_ms"], "vec_scope": c.get("vec_scope", ""),
                     "vec_index": c.get("vec_index", ""), "vec": c.get("vec", ""),
                     "m (matches)": c.get("m", ""), "df (idf)": c.get("df", ""),
                     "sc (BM25)": c.get("sc", ""), "txt": c.get("txt", "")})  # fmt: skip
    lines += _section(
        "EXPLAIN ANALYZE of the hybrid statement, median ms per CTE (20 queries)", rows
    )
    rows = []
    for r in runs:
        for g in r["levers"]["grid"]:
            rows.append({"items": f"{r['items']:,}", "layout": r["layout"], "change": _change(g["change"]),
                         "tune recall@10": g["tune_recall_at_10"],
                         "vector p50 ms": g["tune_vector_p50_ms"]})  # fmt: skip
    lines += _section("Levers on the tuning half (vector side only)", rows)
    rows = []
    for r in runs:
        for label, h in r["levers"]["held_out"].items():
            rows.append({"items": f"{r['items']:,}", "layout": r["layout"], "config": label,
                         "change": _change(h["change"]), "recall@10": h["recall_at_10"],
                         "API p50 ms": h["api_latency"]["p50_ms"],
                         "API p95 ms": h["api_latency"]["p95_ms"]})  # fmt: skip
    lines += _section("Held-out half: defaults against the lever chosen on the tuning half", rows)
    rows = []
    for r in runs:
        for mode, f in r["context_filter"].items():
            rows.append({"items": f"{r['items']:,}", "layout": r["layout"], "iterative scan": mode,
                         "recall@10": f["recall_at_10"], "vector p50 ms": _p50(f["vector_latency"]),
                         "API p50 ms": f["api_latency"]["p50_ms"],
                         "API p95 ms": f["api_latency"]["p95_ms"]})  # fmt: skip
    lines += _section("A context filter keeping 1% of the scope (held-out half)", rows)
    rows = targets(runs)
    if rows:
        lines += ["Targets", common.table(rows, list(rows[0])), ""]
    return "\n".join(lines)


def svg(results: dict) -> str:
    """Three panels against items (log scale): API recall p50/p95, the statement's
    vector and text halves (one workspace), and recall@10 (hollow: the tuned lever)."""
    runs = results.get("runs", [])
    width, height, pad, top = 1260, 380, 60, 60
    panel = (width - 4 * pad) / 3
    bottom = height - 70
    parts = []

    def text(x, y, s, size=12, anchor="middle", weight="normal", fill="#000"):
        parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
                     f'font-weight="{weight}" fill="{fill}" font-family="sans-serif">{s}</text>')  # fmt: skip

    def line(points, colour, dash="", hollow=False, label=None, below=False, anchor="start"):
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points)
        if len(points) > 1:
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                         f'stroke-width="2"{dash}/>')  # fmt: skip
        for x, y, v in points:
            fill = "white" if hollow else colour
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{fill}" stroke="{colour}"/>'
            )
            dx = 6 if anchor == "start" else -6
            text(x + dx, y + (14 if below else -6), label(v), 10, anchor=anchor, fill=colour)

    sizes = sorted({r["items"] for r in runs}) or [10_000]
    lo, hi = math.log10(min(sizes)) - 0.15, math.log10(max(sizes)) + 0.25

    def xpos(left, items):
        return left + panel * (math.log10(items) - lo) / (hi - lo)

    ms = [v for r in runs for v in (r["api_latency"]["p50_ms"], r["api_latency"]["p95_ms"])]
    ms += [r["sql_latency"][k]["p50_ms"] for r in runs for k in ("vector", "text", "both")]
    ms_lo, ms_hi = math.log10(min(ms or [1]) / 1.5), math.log10(max(ms or [10]) * 1.5)

    def y_ms(v):
        return bottom - (bottom - top) * (math.log10(max(v, 10**ms_lo)) - ms_lo) / (ms_hi - ms_lo)

    def y_recall(v):
        return bottom - (bottom - top) * (max(v, 0.5) - 0.5) / 0.5

    titles = [("Recall through the API, ms (log)", "p50 solid, p95 dashed"),
              ("The statement's halves, one workspace, p50 ms", "grey: both; green: vector only; red: text only"),
              ("recall@10 of the vector list vs exact", "hollow: the lever tuned on half")]  # fmt: skip
    for p, (title, subtitle) in enumerate(titles):
        left = pad + p * (panel + pad)
        parts.append(f'<rect x="{left}" y="{top}" width="{panel:.1f}" height="{bottom - top}" '
                     'fill="none" stroke="#999"/>')  # fmt: skip
        text(left + panel / 2, top - 30, title, 14, weight="bold")
        text(left + panel / 2, top - 12, subtitle, 11)
        for items in sizes:
            text(xpos(left, items), bottom + 16, f"{items:,}", 11)
        text(left + panel / 2, bottom + 34, "knowledge items", 11)
        if p < 2:
            for v in (2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000):
                if ms_lo <= math.log10(v) <= ms_hi:
                    text(left - 6, y_ms(v) + 4, v, 10, anchor="end")
                    parts.append(f'<line x1="{left}" x2="{left + panel:.1f}" y1="{y_ms(v):.1f}" '
                                 f'y2="{y_ms(v):.1f}" stroke="#eee"/>')  # fmt: skip
        else:
            for v in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
                text(left - 6, y_recall(v) + 4, v, 10, anchor="end")
            parts.append(f'<line x1="{left}" x2="{left + panel:.1f}" y1="{y_recall(0.95):.1f}" '
                         f'y2="{y_recall(0.95):.1f}" stroke="#54a24b" stroke-dasharray="4 3"/>')  # fmt: skip
            text(left + 6, y_recall(0.95) + 14, "target 0.95", 10, anchor="start", fill="#54a24b")
        for layout, colour in COLOURS.items():
            mine = sorted((r for r in runs if r["layout"] == layout), key=lambda r: r["items"])
            if not mine:
                continue
            below = layout == "spread"
            if p == 0:
                for key, dash in (("p50_ms", ""), ("p95_ms", ' stroke-dasharray="6 4"')):
                    pts = [(xpos(left, r["items"]), y_ms(r["api_latency"][key]), r["api_latency"][key])
                           for r in mine]  # fmt: skip
                    line(pts, colour, dash, label=lambda v: f"{v:.0f}", below=below)
            elif p == 1 and layout == "one":
                for key, c in (("both", "#555"), ("vector", "#54a24b"), ("text", "#e45756")):
                    pts = [(xpos(left, r["items"]), y_ms(r["sql_latency"][key]["p50_ms"]),
                            r["sql_latency"][key]["p50_ms"]) for r in mine]  # fmt: skip
                    line(pts, c, label=lambda v: f"{v:.0f}", below=key == "text")
            elif p == 2:
                pts = [(xpos(left, r["items"]), y_recall(r["recall_at_10"]), r["recall_at_10"])
                       for r in mine]  # fmt: skip
                line(pts, colour, label=lambda v: f"{v:.3f}", below=below)
                for r in mine:
                    chosen = r["levers"]["held_out"]["chosen"]
                    if chosen["change"]:
                        v = chosen["recall_at_10"]
                        line([(xpos(left, r["items"]), y_recall(v), v)], colour, hollow=True,
                             label=lambda v, c=chosen["change"]: f"{v:.3f} ({_change(c)})",
                             below=below, anchor="end")  # fmt: skip
    legend_y = height - 10
    for k, (layout, colour) in enumerate(COLOURS.items()):
        x = pad + k * 260
        parts.append(f'<rect x="{x}" y="{legend_y - 10}" width="12" height="12" fill="{colour}"/>')
        label = "one workspace" if layout == "one" else "spread over 1,000 workspaces"
        text(x + 18, legend_y, label, 11, anchor="start")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}"><rect width="100%" height="100%" fill="white"/>'
            + "".join(parts) + "</svg>\n")  # fmt: skip


def write(out: Path, results: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    out.with_suffix(".md").write_text(markdown(results) + "\n")
    out.with_suffix(".svg").write_text(svg(results))
