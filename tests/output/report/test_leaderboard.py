"""The leaderboard page: self-contained, escaped, with its intervals, chart, matrix and domains."""

from __future__ import annotations

import numpy as np

from lifesearch_local.analysis.leaderboard import ScoreTable, leaderboard
from lifesearch_local.output.report.leaderboard import render_leaderboard


def test_page_shows_intervals_and_escapes_names():
    rng = np.random.default_rng(1)
    tids = [f"t{i}" for i in range(12)]
    agents = {"<b>x</b>": {t: rng.random() for t in tids}, "y": {t: rng.random() for t in tids}, "solo": {"t0": 0.4}}
    lb = leaderboard([ScoreTable("pub.csv", "j<i>", "total", agents, domains=dict.fromkeys(tids, "Health"))],
                     n_resamples=200)
    page = render_leaderboard(lb, "Leaderboard <script>")
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page and "<script>" not in page
    assert 'id="leaderboard-j-i"' in page and 'id="chart-j-i-total"' in page and 'id="compare-j-i-total"' in page
    assert "Per domain (total, points" in page and "solo: n=1: no interval" in page
    assert page.count('class="ci"') == 2  # whiskers for the two agents with an interval, none for solo
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def two_dimensions():
    """Three agents on 30 tasks and two dimensions: x clearly ahead on `total`, nobody on `analysis`."""
    rng = np.random.default_rng(4)
    tids = [f"t{i}" for i in range(30)]
    total = {"x": {t: 0.8 + 0.1 * rng.random() for t in tids}, "y": {t: 0.3 + 0.1 * rng.random() for t in tids},
             "z": {t: 0.3 + 0.1 * rng.random() for t in tids}}
    analysis = {a: {t: rng.random() for t in tids} for a in "xyz"}
    return [ScoreTable("runs/a/agg_scores_total.csv", None, "total", total),
            ScoreTable("runs/a/agg_scores_analysis.csv", None, "analysis", analysis)]


def test_every_dimension_gets_its_groups_chart_and_matrix():
    """Groups and the matrix were drawn for `total` only; the other dimensions were columns."""
    page = render_leaderboard(leaderboard(two_dimensions(), n_resamples=300), sources=["a.csv", "b.csv"])
    for dim in ("total", "analysis"):
        assert f'id="compare-not-stated-{dim}"' in page and f'id="chart-not-stated-{dim}"' in page
        assert f'id="dim-not-stated-{dim}"' in page
    assert page.count("differences hold at 0.05") >= 2 and "no pair of the 3 agents can be told apart" in page


def test_the_title_is_short_and_the_sources_are_listed_below():
    """The title was the raw relative paths (it overflowed at 900 px)."""
    page = render_leaderboard(leaderboard(two_dimensions(), n_resamples=200), sources=["runs/a/agg_scores_total.csv"])
    assert "<h1>Leaderboard</h1>" in page and "<title>Leaderboard</title>" in page
    assert '<ul class="sources"><li><code>runs/a/agg_scores_total.csv</code></li></ul>' in page


def test_the_chart_has_an_axis_the_groups_and_points_not_percent():
    page = render_leaderboard(leaderboard(two_dimensions(), n_resamples=200))
    chart = page[page.index('id="chart-not-stated-total"'):]
    chart = chart[:chart.index("</svg>")]
    assert 'class="axis"' in chart and chart.count('class="xt"') >= 3 and "total, points (higher is better)" in chart
    assert '<tspan class="tag">a</tspan>' in chart  # x is alone in group a
    import re

    assert not re.search(r"\d\.\d+%", chart) and " points, 95% CI [" in chart  # "45.40%" was the tooltip


def _cells(page: str, tid: str) -> list[tuple[str, str]]:
    """(class, small text) of every coloured or grey cell of one comparison matrix."""
    import re

    part = page[page.index(f'id="{tid}"'):]
    part = part[:part.index("</table>")]
    return re.findall(r'<span class="(win|loss|ns)"[^>]*>[^<]*<br><small>([^<]*)</small>', part)


def _excludes_zero(small: str) -> bool:
    import re

    lo, hi = (float(x.replace("−", "-")) for x in re.findall(r"[+−-]?\d+\.\d", small)[:2])
    return lo > 0 or hi < 0


def test_a_cell_s_colour_and_its_interval_never_disagree_unsaid():
    """On DRB II's published totals gemini − qwen is +2.9 [+0.3, +5.5] with Holm p 0.23: a grey cell
    whose printed interval excluded 0. Every cell now agrees with its colour or says "unadjusted"."""
    import pytest

    from tests.helpers.drb2 import published_dir

    path = published_dir() / "agg_scores_total.csv"
    if not path.is_file():
        pytest.skip(f"{path} absent")
    from lifesearch_local.run.task_scores import read_source

    page = render_leaderboard(leaderboard(read_source(path), n_resamples=2000))
    cells = _cells(page, "compare-not-stated-total")
    assert len(cells) == 42
    for cls, small in cells:
        if "unadjusted" not in small:
            assert _excludes_zero(small) == (cls != "ns"), (cls, small)
    flagged = [s for c, s in cells if "unadjusted" in s]
    assert flagged and all(c == "ns" for c, s in cells if "unadjusted" in s and _excludes_zero(s))


def test_lower_is_better_turns_the_order_and_the_colours():
    tables = two_dimensions()
    lb = leaderboard(tables[:1], n_resamples=300, lower_is_better=True)
    (r,), = lb.rankings
    assert r.agents[-1] == "x" and r.lower_is_better
    page = render_leaderboard(lb)
    assert "(points, lower is better)" in page
    cells = _cells(page, "compare-not-stated-total")
    # the row agent y is better than x (lower): its cell against x is green
    assert ("win" in [c for c, _ in cells]) and ("loss" in [c for c, _ in cells])
    x_row = page[page.index('id="compare-not-stated-total"'):]
    x_row = x_row[x_row.index("<td >x</td>") if "<td >x</td>" in x_row else x_row.index(">x</td>"):]
    assert 'class="loss"' in x_row.split("</tr>")[0]


def test_the_page_at_900_px_in_chromium(tmp_path):
    """At 900 px (a laptop's half screen) the page is no wider than the window, the summary table fits
    without its own scrollbar, and no chart label leaves its chart or overlaps another."""
    import json

    import pytest

    from tests.helpers.browser import LAYOUT_JS, Browser, find_chromium

    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium binary (install Debian's `chromium`; .ci/run does) — browser checks not run")
    tables = two_dimensions() + [ScoreTable("runs/a/agg_scores_blocked.csv", None, "blocked", two_dimensions()[1].scores),
                                 ScoreTable("runs/a/agg_scores_presentation.csv", None, "presentation",
                                            two_dimensions()[0].scores)]
    html = tmp_path / "lb.html"
    html.write_text(render_leaderboard(leaderboard(tables, n_resamples=200), sources=[t.source for t in tables]))
    b = Browser(binary, tmp_path / "profile")
    try:
        page = b.open(html.as_uri(), width=900, height=1200)
        assert page.errors() == []
        got = json.loads(page.eval(LAYOUT_JS))
        assert got["page"] <= 0 and "leaderboard-not-stated" not in got["scrolled"], got
        assert got["outside"] == [] and got["overlaps"] == []
        assert page.eval("document.querySelector('h1').getBoundingClientRect().width") <= 900
    finally:
        b.close()
