"""The results table (Markdown) and the learning-curve chart (hand-written SVG)."""

from __future__ import annotations

from .experiment import METRICS

COLORS = {
    "none": "#888888",
    "recency": "#1f77b4",
    "self_report": "#d62728",
    "cairn": "#2ca02c",
    "cairn_lessons": "#9467bd",
    "cairn@heldout": "#98df8a",
    "self_report@heldout": "#ff9896",
}


def fmt(entry: dict) -> str:
    if entry["mean"] is None:
        return "–"
    return f"{entry['mean']:.3g} [{entry['lo']:.3g}, {entry['hi']:.3g}]"


def seed_counts(result: dict) -> list[str]:
    """A line naming each policy's seed count when they differ (a run cut short)."""
    counts = {n: v["intervals"]["success_rate"]["n"] for n, v in result["policies"].items()}
    if len(set(counts.values())) <= 1:
        return []
    listed = ", ".join(f"{name} {n}" for name, n in counts.items())
    return [f"Seeds per policy (the run was stopped before all finished): {listed}.", ""]


def markdown(result: dict, *, title: str, wall_s: float) -> str:
    p = result["params"]
    lines = [
        f"# {title}",
        "",
        f"{result['seeds']} seeds × {p['episodes']} episodes × {p['families']} task families, "
        f"change at episode {p['change_at'] or p['episodes'] // 2 + 1}, attack from episode "
        f"{p['attack_from'] + 1}; f={p['f']} w={p['w']} g={p['g']} m={p['m']}; "
        f"wall time {wall_s:.0f} s. Means with 95% intervals over seeds (t).",
        "",
        *seed_counts(result),
        "| metric | " + " | ".join(result["policies"]) + " |",
        "|---|" + "---|" * len(result["policies"]),
    ]
    for m in METRICS:
        cells = [fmt(v["intervals"][m]) for v in result["policies"].values()]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def svg(result: dict, *, title: str, key: str = "curve", label: str = "task success rate",
        top: float = 1.0) -> str:  # fmt: skip
    """One learning curve per policy with its 95% band; ``key`` picks the curve."""
    w, h, pad = 640, 360, 50
    episodes = result["params"]["episodes"]
    sx = lambda e: pad + (w - 2 * pad) * e / max(1, episodes - 1)  # noqa: E731
    sy = lambda v: h - pad - (h - 2 * pad) * min(max(v, 0), top) / top  # noqa: E731
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="13">{title}</text>',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
        f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">episode</text>',
        f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle">'
        f"{label}</text>",
    ]
    for v in (top * k / 4 for k in range(5)):
        parts.append(f'<text x="{pad - 6}" y="{sy(v) + 4}" text-anchor="end">{v:.2g}</text>')
        parts.append(f'<line x1="{pad}" y1="{sy(v)}" x2="{w - pad}" y2="{sy(v)}" stroke="#eee"/>')
    change = result["params"]["change_at"] or episodes // 2
    parts.append(
        f'<line x1="{sx(change)}" y1="{pad}" x2="{sx(change)}" y2="{h - pad}" '
        'stroke="#999" stroke-dasharray="4 3"/>'
        f'<text x="{sx(change) + 3}" y="{pad + 10}">change</text>'
    )
    for i, (name, entry) in enumerate(result["policies"].items()):
        color = COLORS.get(name, "black")
        curve = entry.get(key)
        if not curve:
            continue
        band = [(sx(e), sy(c["hi"])) for e, c in enumerate(curve)] + [
            (sx(e), sy(c["lo"])) for e, c in reversed(list(enumerate(curve)))
        ]
        parts.append(
            f'<polygon points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in band)}" '
            f'fill="{color}" fill-opacity="0.12" stroke="none"/>'
        )
        pts = " ".join(f"{sx(e):.1f},{sy(c['mean']):.1f}" for e, c in enumerate(curve))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        parts.append(
            f'<rect x="{w - pad - 100}" y="{pad + 14 * i}" width="10" height="10" fill="{color}"/>'
            f'<text x="{w - pad - 86}" y="{pad + 9 + 14 * i}">{name}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
