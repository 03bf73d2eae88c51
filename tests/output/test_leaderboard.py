"""Leaderboard terminal tables and CSV rows: short intervals, groups in words, no zero-width interval."""

from __future__ import annotations

import numpy as np

from lifesearch_local.analysis.leaderboard import ScoreTable, leaderboard
from lifesearch_local.output.leaderboard import groups_line, leaderboard_rows, renderables, short_ci


def test_short_ci_and_its_reasons():
    assert short_ci(0.5, (0.354, 0.672), None) == "50.0 [35, 67]"
    assert short_ci(0.556, (np.nan, np.nan), "n=1: no interval") == "55.6 (n=1)"
    assert short_ci(1.0, (np.nan, np.nan), "no spread: no interval") == "100.0 (no spread)"


def lb(agents: dict, **kw):
    return leaderboard([ScoreTable("pub.csv", None, "total", agents, **kw)], n_resamples=300)


def test_groups_line_names_the_groups():
    rng = np.random.default_rng(0)
    tids = [f"t{i}" for i in range(30)]
    far = lb({"hi": {t: 0.9 + 0.1 * rng.random() for t in tids}, "lo": {t: 0.1 * rng.random() for t in tids}})
    assert groups_line(far.rankings[0][0]).startswith("1 of 1 differences hold") and "a: hi; b: lo" in groups_line(
        far.rankings[0][0])
    near = lb({"x": {t: rng.random() for t in tids}, "y": {t: rng.random() for t in tids}})
    assert groups_line(near.rankings[0][0]).startswith("no pair of the 2 agents can be told apart")


def test_one_task_gives_reasons_not_zero_width_intervals():
    one = lb({"x": {"t1": 0.179}, "y": {"t1": 0.051}}, domains={"t1": "Health"})
    rows = leaderboard_rows(one)
    mean = next(r for r in rows if r["metric"] == "mean" and r["agent"] == "x" and "domain" not in r)
    assert np.isnan(mean["ci_lo"]) and mean["ci_reason"] == "n=1: no interval" and mean["value"] == 100 * 0.179
    diff = next(r for r in rows if r["metric"] == "diff")
    assert np.isnan(diff["ci_hi"]) and diff["ci_reason"] == "n=1: no interval"
    from rich.console import Console

    con = Console(width=200, record=True)
    for item in renderables(one):
        con.print(item)
    text = con.export_text()
    assert "17.9 (n=1: no interval)" in text and "[17.9, 17.9]" not in text and "+12.8 (n=1: no interval)" in text


def test_past_the_terminal_s_pair_limit_one_line_points_to_the_csv(monkeypatch):
    """300 systems are 44,850 pairs: a terminal table of them took minutes to draw and helps nobody."""
    from lifesearch_local.output import leaderboard as out

    monkeypatch.setattr(out, "MAX_PAIRS_SHOWN", 2)
    agents = {a: {"t0": 0.1 * k, "t1": 0.1 * k + 0.05} for k, a in enumerate("xyz")}
    items = renderables(leaderboard([ScoreTable("s.csv", None, "total", agents)], n_resamples=50))
    line = next(i for i in items if isinstance(i, str) and "pairs (" in i)
    assert line.startswith("3 pairs (0 hold at 0.05 after Holm): more than the terminal shows (2)")
    assert not any(getattr(i, "title", None) and "Paired comparisons" in str(i.title) for i in items)
