"""The ingestion bench's chart: batch remember against the raw embedder on the same
batches, throughput of every path, and worker RSS when measured."""

from __future__ import annotations


def bar_chart(out, y0, title, bars, scale_top, fmt, log=False, width=300):
    import math

    out.append(f'<text x="10" y="{y0}" font-weight="bold">{title}</text>')
    for i, (label, value, color) in enumerate(bars):
        if log:
            size = width * math.log10(1 + value) / math.log10(1 + scale_top)
        else:
            size = width * value / scale_top
        y = y0 + 10 + i * 26
        out.append(f'<text x="10" y="{y + 14}">{label}</text>')
        out.append(f'<rect x="230" y="{y}" width="{size:.1f}" height="18" fill="{color}"/>')
        out.append(f'<text x="{235 + size:.1f}" y="{y + 14}">{fmt(value)}</text>')
    return y0 + 10 + len(bars) * 26 + 20


def ingest_svg(results: dict) -> str:
    """Batch remember against the raw embedder on the same batches (the ratios, with
    the 0.7 target), throughput of every path, and worker RSS when measured."""
    short = results["short_items"]
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="760" height="{height}" '
           'font-family="sans-serif" font-size="12">']  # fmt: skip
    ratios = [("short items, 1 client", short["ratio_to_raw_embedder"], "#47a")]
    if "batch_remember" in results:
        ratios.append(
            ("LoCoMo turns, 2 clients", results["batch_remember"]["ratio_to_raw_embedder"], "#4a7")
        )
    y = bar_chart(
        out, 18, "batch remember ÷ raw embedder on the same batches (target 0.7)",
        ratios, 1.0, lambda v: f"{v:.2f}×",
    )  # fmt: skip
    target = 230 + 300 * 0.7
    out.append(
        f'<line x1="{target}" y1="24" x2="{target}" y2="{y - 16}" stroke="#c33" '
        'stroke-dasharray="4 3"/>'
    )
    bars = [
        ("raw embedder, short items", short["raw_items_per_s"], "#9bd"),
        ("batch remember, short items", short["items_per_s"], "#47a"),
    ]
    if "batch_remember" in results:
        b = results["batch_remember"]
        bars += [
            ("raw embedder, LoCoMo", b["raw_items_per_s"], "#9d9"),
            ("batch remember, LoCoMo", b["items_per_s"], "#4a7"),
            ("batch turns", results["batch_turns"]["turns_per_s"], "#a84"),
            *[
                (f"turns, {m}", results[f"batch_turns_{m}"]["turns_per_s"], "#a84")
                for m in results["other_turn_contexts"]
            ],
        ]
    top = max(v for _, v, _ in bars) or 1
    y = bar_chart(out, y, "items/s (log scale)", bars, top, str, log=True)
    points = results.get("rss") or []
    if len(points) > 1:
        peak = max(max(p["rss_mb"] or [0]) for p in points) or 1
        last = points[-1]["embedded"] or 1
        out.append(
            f'<text x="10" y="{y}" font-weight="bold">worker RSS (MB) over embeddings</text>'
        )
        for worker in range(max(len(p["rss_mb"]) for p in points)):
            coords = " ".join(
                f"{60 + 600 * p['embedded'] / last:.1f},"
                f"{y + 130 - 110 * p['rss_mb'][worker] / peak:.1f}"
                for p in points
                if len(p["rss_mb"]) > worker
            )
            color = "#47a" if worker == 0 else "#a74"
            out.append(
                f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>'
            )
        out.append(f'<text x="10" y="{y + 25}">{peak} MB</text>')
        out.append(f'<text x="10" y="{y + 130}">0</text>')
        out.append(f'<text x="600" y="{y + 145}">{last} embedded</text>')
        y += 155
    out.append("</svg>")
    out[0] = out[0].format(height=y)
    return "\n".join(out)
