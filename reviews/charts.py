"""Small server-rendered charts: inline SVG, no JavaScript, no CDN.

``bar_chart`` stacks one or more series per label (job runs per day by
status; later: queue sizes, a confidence histogram); ``line_chart`` draws
series over the same labels (later: learned vs retired over time). Both
return a ``<figure>`` with an accessible SVG (``role="img"``, a title and a
one-line description), a hover ``<title>`` per point and an HTML legend.
Colours come from CSS classes (``s-ok``, ``s-bad``, ``s-accent``, ``s-muted``,
``s-warn``) so charts follow the stylesheet.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import slugify

WIDTH = 960
HEIGHT = 220
LEFT, RIGHT, TOP, BOTTOM = 40, 8, 10, 24


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float]
    tone: str = "accent"


def nice_max(value: float) -> float:
    """The smallest 1, 2, 4, 6 or 8 × 10ⁿ at or above ``value`` (1 for empty charts).

    Even steps keep the middle grid line on a round number.
    """
    if value <= 0:
        return 1
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 4, 6, 8, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude  # pragma: no cover - the loop always returns


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _fmt(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _check(labels: Sequence[str], series: Sequence[Series]) -> None:
    for s in series:
        if len(s.values) != len(labels):
            raise ValueError(
                f"series {s.name!r} has {len(s.values)} values for {len(labels)} labels"
            )


class _Frame:
    """Axes, grid and labels shared by both chart kinds."""

    def __init__(self, *, labels, top_value, width, height):
        self.labels = list(labels)
        self.width, self.height = width, height
        self.plot_w = width - LEFT - RIGHT
        self.plot_h = height - TOP - BOTTOM
        self.max = nice_max(top_value)
        if self.max == 1 and float(top_value).is_integer():
            self.max = 2  # counts: a grid line at 0.5 would be meaningless
        self.band = self.plot_w / max(1, len(self.labels))

    def y(self, value: float) -> float:
        return TOP + self.plot_h - (value / self.max) * self.plot_h

    def x_center(self, index: int) -> float:
        return LEFT + self.band * (index + 0.5)

    def grid(self) -> str:
        parts = []
        for fraction in (0, 0.5, 1):
            value = self.max * fraction
            y = _fmt(self.y(value))
            parts.append(
                f'<line class="grid" x1="{LEFT}" x2="{self.width - RIGHT}" y1="{y}" y2="{y}"/>'
                f'<text class="axis" x="{LEFT - 6}" y="{y}" text-anchor="end" '
                f'dominant-baseline="middle">{_num(value)}</text>'
            )
        # Label every n-th point counted back from the newest, so the last is always named.
        every = max(1, math.ceil(len(self.labels) / max(1, self.plot_w // 64)))
        last = len(self.labels) - 1
        for i, label in enumerate(self.labels):
            if (last - i) % every:
                continue
            parts.append(
                f'<text class="axis" x="{_fmt(self.x_center(i))}" y="{self.height - 6}" '
                f'text-anchor="middle">{escape(label)}</text>'
            )
        return "".join(parts)


def _figure(*, title, description, body, series, width, height, empty_text) -> SafeString:
    ident = f"chart-{slugify(title) or 'untitled'}"
    legend = format_html_join(
        "",
        '<span class="legend-item"><span class="swatch s-{}"></span>{}</span>',
        ((s.tone, s.name) for s in series),
    )
    empty = ""
    if empty_text:
        empty = format_html(
            '<text class="empty" x="{}" y="{}" text-anchor="middle">{}</text>',
            _fmt(LEFT + (width - LEFT - RIGHT) / 2),
            _fmt(TOP + (height - TOP - BOTTOM) / 2),
            empty_text,
        )
    return format_html(
        '<figure class="chart" id="{id}">'
        '<figcaption><span class="chart-title">{title}</span>'
        '<span class="legend">{legend}</span></figcaption>'
        '<svg viewBox="0 0 {w} {h}" role="img" aria-labelledby="{id}-title {id}-desc" '
        'preserveAspectRatio="xMidYMid meet">'
        '<title id="{id}-title">{title}</title><desc id="{id}-desc">{desc}</desc>'
        "{body}{empty}</svg></figure>",
        id=ident,
        w=width,
        h=height,
        title=title,
        desc=description,
        body=mark_safe(body),  # built above from numbers and escaped labels
        empty=empty,
        legend=legend,
    )


def _describe(labels, series, totals, unit) -> str:
    total = sum(totals)
    if not labels:
        return "No data."
    peak = max(range(len(totals)), key=lambda i: totals[i])
    unit = f" {unit}" if unit else ""
    return (
        f"{len(labels)} points from {labels[0]} to {labels[-1]}; "
        f"total {_num(total)}{unit}; peak {_num(totals[peak])} at {labels[peak]}. "
        + "; ".join(f"{s.name}: {_num(sum(s.values))}" for s in series)
    )


def bar_chart(**chart: Any) -> SafeString:
    """Stacked bars: one column per label, one segment per series (in order, bottom up).
    Takes ``chart_figure``'s keywords."""
    return chart_figure(draw=_bars, **chart)


def line_chart(**chart: Any) -> SafeString:
    """One line per series over the labels, with a dot (and hover title) per point.
    Takes ``chart_figure``'s keywords."""
    return chart_figure(draw=_lines, **chart)


def chart_figure(
    *,
    draw: Callable[[Sequence[str], Sequence[Series], list[float], int, int], str],
    labels: Sequence[str],
    series: Sequence[Series],
    title: str,
    unit: str = "",
    width: int = WIDTH,
    height: int = HEIGHT,
    empty_text: str = "No data yet",
) -> SafeString:
    """A chart's ``<figure>``: ``draw(labels, series, totals, width, height)`` returns the
    SVG body; the description, legend and empty text are the same for every kind."""
    _check(labels, series)
    totals = [sum(s.values[i] for s in series) for i in range(len(labels))]
    return _figure(
        title=title,
        description=_describe(labels, series, totals, unit),
        body=draw(labels, series, totals, width, height),
        series=series,
        width=width,
        height=height,
        empty_text=empty_text if not any(totals) else "",
    )


def _bars(labels, series, totals, width, height) -> str:
    frame = _Frame(labels=labels, top_value=max(totals, default=0), width=width, height=height)
    bar_w = frame.band * 0.7
    parts = [frame.grid()]
    for i, label in enumerate(labels):
        x = frame.x_center(i) - bar_w / 2
        base = 0.0
        hover = f"{label}: " + ", ".join(f"{_num(s.values[i])} {s.name}" for s in series)
        segments = []
        for s in series:
            value = s.values[i]
            if value <= 0:
                continue
            y_top, y_bottom = frame.y(base + value), frame.y(base)
            segments.append(
                f'<rect class="s-{escape(s.tone)}" x="{_fmt(x)}" y="{_fmt(y_top)}" '
                f'width="{_fmt(bar_w)}" height="{_fmt(y_bottom - y_top)}"/>'
            )
            base += value
        # A full-height transparent band makes the hover title easy to hit.
        parts.append(
            f'<g class="col"><title>{escape(hover)}</title>'
            f'<rect class="hit" x="{_fmt(frame.x_center(i) - frame.band / 2)}" y="{TOP}" '
            f'width="{_fmt(frame.band)}" height="{frame.plot_h}"/>{"".join(segments)}</g>'
        )
    parts.append(
        f'<line class="axis-line" x1="{LEFT}" x2="{width - RIGHT}" '
        f'y1="{TOP + frame.plot_h}" y2="{TOP + frame.plot_h}"/>'
    )
    return "".join(parts)


def _lines(labels, series, totals, width, height) -> str:
    top = max((v for s in series for v in s.values), default=0)
    frame = _Frame(labels=labels, top_value=top, width=width, height=height)
    parts = [frame.grid()]
    for s in series:
        points = [(frame.x_center(i), frame.y(v)) for i, v in enumerate(s.values)]
        path = " ".join(f"{_fmt(x)},{_fmt(y)}" for x, y in points)
        parts.append(f'<polyline class="s-{escape(s.tone)}" points="{path}"/>')
        for (x, y), label, value in zip(points, labels, s.values, strict=True):
            parts.append(
                f'<circle class="s-{escape(s.tone)}" cx="{_fmt(x)}" cy="{_fmt(y)}" r="3">'
                f"<title>{escape(f'{label}: {_num(value)} {s.name}')}</title></circle>"
            )
    return "".join(parts)
