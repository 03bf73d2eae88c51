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
    assert 'id="leaderboard-j-i"' in page and 'id="chart-j-i"' in page and 'id="compare-j-i"' in page
    assert "Per domain (total, points)" in page and "solo: n=1: no interval" in page
    assert page.count('class="ci"') == 2  # whiskers for the two agents with an interval, none for solo
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
