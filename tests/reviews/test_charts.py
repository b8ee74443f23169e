"""Inline SVG charts: valid markup, proportional bars, escaped labels, empty states."""

import xml.etree.ElementTree as ET

import pytest

from reviews.charts import Series, bar_chart, line_chart, nice_max

SVG = "{http://www.w3.org/2000/svg}"


def _svg(html: str) -> ET.Element:
    figure = ET.fromstring(html)  # the whole figure must be well-formed XML
    svg = figure.find("svg")
    assert svg is not None
    return svg


def _rects(svg, tone):
    return [r for r in svg.iter("rect") if r.get("class") == f"s-{tone}"]


def test_bars_are_proportional_and_stacked():
    html = bar_chart(
        labels=["Mon", "Tue", "Wed"],
        series=[Series("ok", [2, 4, 0], "ok"), Series("failed", [0, 2, 1], "bad")],
        title="Runs",
    )
    svg = _svg(html)
    ok = _rects(svg, "ok")
    bad = _rects(svg, "bad")
    assert len(ok) == 2 and len(bad) == 2  # zero segments are not drawn
    heights = [float(r.get("height")) for r in ok]
    assert heights[1] == pytest.approx(2 * heights[0], rel=0.01)
    # Tuesday's failed segment sits directly on top of its ok segment.
    tue_ok, tue_bad = ok[1], bad[0]
    assert float(tue_bad.get("y")) + float(tue_bad.get("height")) == pytest.approx(
        float(tue_ok.get("y")), abs=0.11
    )
    titles = [t.text for t in svg.iter("title")]
    assert "Tue: 4 ok, 2 failed" in titles


def test_the_chart_is_accessible():
    html = bar_chart(labels=["a", "b"], series=[Series("runs", [1, 3])], title="Job runs")
    svg = _svg(html)
    assert svg.get("role") == "img"
    assert svg.get("aria-labelledby") == "chart-job-runs-title chart-job-runs-desc"
    assert "total 4" in html and "peak 3 at b" in html
    assert 'class="legend-item"' in html


def test_labels_and_titles_are_escaped():
    html = bar_chart(labels=["<b>x</b>"], series=[Series("a&b", [1])], title='"Quoted" <chart>')
    _svg(html)  # still well-formed
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert "a&amp;b" in html


def test_an_all_zero_chart_says_so():
    html = bar_chart(
        labels=["a", "b"], series=[Series("runs", [0, 0])], title="T", empty_text="Nothing"
    )
    svg = _svg(html)
    assert not _rects(svg, "accent")
    assert "Nothing" in html


def test_mismatched_series_are_refused():
    with pytest.raises(ValueError, match="2 values for 3 labels"):
        bar_chart(labels=["a", "b", "c"], series=[Series("x", [1, 2])], title="T")


def test_line_chart_has_a_point_per_value():
    html = line_chart(
        labels=["w1", "w2", "w3"],
        series=[Series("learned", [1, 5, 3], "ok"), Series("retired", [0, 1, 2], "bad")],
        title="Learned vs retired",
    )
    svg = _svg(html)
    lines = list(svg.iter("polyline"))
    assert len(lines) == 2 and len(lines[0].get("points").split()) == 3
    assert len(list(svg.iter("circle"))) == 6


@pytest.mark.parametrize(
    ("value", "expected"), [(0, 1), (1, 1), (3, 4), (7, 8), (13, 20), (250, 400), (0.3, 0.4)]
)
def test_axis_maxima_are_round(value, expected):
    assert nice_max(value) == pytest.approx(expected)
