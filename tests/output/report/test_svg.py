"""The report's SVG charts: labels cut only when too long, spread apart, legends wrapped."""

from __future__ import annotations


def test_chart_labels_are_cut_only_when_too_long_and_spread_apart():
    from lifesearch_local.output.report import svg

    bars = svg.hbars({"tiny-qwen3-agent": 50.0, "x" * 80: 10.0}, title="t", chart_id="c")
    assert ">tiny-qwen3-agent<title>" in bars  # sized to the longest label that fits
    keep = int((0.4 * 600 - 12) / svg.CHAR_W) - 1  # 40% of the 600 px chart, less the gap, less the "…"
    assert ">" + "x" * keep + "…<title>" + "x" * 80 in bars  # cut, the full name in the tooltip
    ys = svg.spread_labels([50.0, 51.0, 52.0, 200.0], lo=10.0, hi=300.0)
    assert sorted(ys)[1] - sorted(ys)[0] >= svg.LABEL_GAP and sorted(ys)[2] - sorted(ys)[1] >= svg.LABEL_GAP
    assert ys[3] == 200.0 and svg.spread_labels([295.0, 296.0], lo=10.0, hi=300.0)[1] <= 300.0
    rows = svg.legend_rows([f"agent-{i:02d}-with-a-long-name" for i in range(12)], 56, 848)
    assert len(rows) > 1 and all(x + 24 + svg.CHAR_W * len(n) - 10 <= 848 for r in rows for x, n in r)
