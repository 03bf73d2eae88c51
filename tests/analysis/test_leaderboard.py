"""Leaderboards: what is ranked together, missing cells, groups that cannot be told apart, the JSON in points."""

from __future__ import annotations

import numpy as np
import pytest

from lifesearch_local.analysis import resampling as stats
from lifesearch_local.analysis.leaderboard import (
    ScoreTable,
    indistinct_groups,
    leaderboard,
    leaderboard_json,
    select_tasks,
)
from lifesearch_local.errors import LifesearchError
from lifesearch_local.records import JudgeIdentity

TIDS = [f"t{i}" for i in range(20)]


def scores(rng: np.random.Generator, shift: float = 0.0, tids=TIDS) -> dict[str, float]:
    return {t: float(np.clip(rng.random() * 0.6 + shift, 0, 1)) for t in tids}


def table(source: str, judge: str | None, agents: dict, **kw) -> ScoreTable:
    return ScoreTable(source, judge, kw.pop("dimension", "total"), agents, **kw)


def test_different_judges_are_ranked_within_each_unless_mixing_is_allowed():
    rng = np.random.default_rng(1)
    a = table("runA", "tiny-judge", {"x": scores(rng), "y": scores(rng)})
    b = table("drb2.csv", None, {"z": scores(rng)})
    lb = leaderboard([a, b], n_resamples=200)
    assert [[r.judge for r in rs] for rs in lb.rankings] == [["tiny-judge"], ["not stated"]]
    assert len(lb.notes) == 1 and "2 judges (tiny-judge, not stated)" in lb.notes[0] and "ranked within each judge" in lb.notes[0]
    assert set(leaderboard_json(lb)["judges"]) == {"tiny-judge", "not stated"}
    mixed = leaderboard([a, b], allow_mixed=True, n_resamples=200)
    (only,), = mixed.rankings
    assert set(only.agents) == {"x", "y", "z"} and "ranked together anyway (--allow-mixed)" in mixed.notes[0]


def test_one_judge_name_with_another_fingerprint_is_another_judge():
    rng = np.random.default_rng(2)
    ident = JudgeIdentity(judge="j", engine="hf", weights_hash="aaaa")
    a = table("runA", "j", {"x": scores(rng)}, identity=ident)
    b = table("runB", "j", {"y": scores(rng)}, identity=ident.model_copy(update={"weights_hash": "bbbb"}))
    lb = leaderboard([a, b], n_resamples=200)
    assert len(lb.rankings) == 2 and "weights_hash: 'aaaa' != 'bbbb'" in lb.notes[0]
    same = leaderboard([a, table("runB", "j", {"y": scores(rng)}, identity=ident)], n_resamples=200)
    assert len(same.rankings) == 1 and same.notes == []


def test_different_task_sets_are_not_ranked_together_silently():
    rng = np.random.default_rng(3)
    a = table("runA", "j", {"x": scores(rng)})
    b = table("runB", "j", {"y": scores(rng, tids=TIDS[:5])})
    lb = leaderboard([a, b], n_resamples=200)
    assert len(lb.rankings) == 2 and "different tasks" in lb.notes[0] and "5 shared" in lb.notes[0]
    assert "--task-ids" in lb.notes[0]
    (mixed,), = leaderboard([a, b], allow_mixed=True, n_resamples=200).rankings
    (c,) = mixed.uncertainty.comparisons
    assert c.n_tasks == 5  # the pair on its shared tasks
    (shared,), = leaderboard(select_tasks([a, b], set(TIDS[:5])), n_resamples=200).rankings
    assert shared.agents and set(shared.agents) == {"x", "y"}


def test_a_missing_cell_leaves_that_task_out_of_that_pair_only():
    rng = np.random.default_rng(4)
    full = {"x": scores(rng, 0.2), "y": scores(rng), "z": scores(rng)}
    gappy = {**full, "z": {t: v for t, v in full["z"].items() if t != "t3"}}
    (r,), = leaderboard([table("pub.csv", None, gappy)], n_resamples=500).rankings
    pairs = {frozenset((c.a, c.b)): c for c in r.uncertainty.comparisons}
    assert pairs[frozenset("xy")].n_tasks == 20 and pairs[frozenset("xz")].n_tasks == 19 == pairs[frozenset("yz")].n_tasks
    assert r.uncertainty.n_tasks == {"x": 20, "y": 20, "z": 19}
    assert r.means["z"] == pytest.approx(np.mean([v for t, v in full["z"].items() if t != "t3"]))
    # the complete pair's numbers are those of the table without the gap
    (whole,), = leaderboard([table("pub.csv", None, full)], n_resamples=500).rankings
    xy = {frozenset((c.a, c.b)): c for c in whole.uncertainty.comparisons}[frozenset("xy")]
    assert (pairs[frozenset("xy")].diff, pairs[frozenset("xy")].ci95) == (xy.diff, xy.ci95)


def comp(a: str, b: str, holds: bool) -> stats.Comparison:
    return stats.Comparison(a, b, 0.1, (0.0, 0.2), 0.001 if holds else 0.5, 0.001 if holds else 0.5, 10)


def test_groups_of_agents_that_cannot_be_told_apart():
    agents = ["a", "b", "c", "d"]
    # a > c, a > d, b > d hold; every other pair does not: groups {a, b}, {b, c}, {c, d}
    held = {("a", "c"), ("a", "d"), ("b", "d")}
    cs = [comp(x, y, (x, y) in held) for i, x in enumerate(agents) for y in agents[i + 1:]]
    assert indistinct_groups(agents, cs) == [["a", "b"], ["b", "c"], ["c", "d"]]
    assert indistinct_groups(agents, [comp(x, y, False) for x, y in [("a", "b")]]) == [agents]
    assert indistinct_groups(agents, [comp(x, y, True) for i, x in enumerate(agents) for y in agents[i + 1:]]) == [
        ["a"], ["b"], ["c"], ["d"]]


def test_json_is_in_points_with_score_s_field_names():
    rng = np.random.default_rng(5)
    tab = table("pub.csv", None, {"x": scores(rng, 0.3), "y": scores(rng)}, domains={t: "d1" for t in TIDS})
    lb = leaderboard([tab], n_resamples=300)
    out = leaderboard_json(lb)
    (r,), = lb.rankings
    u = r.uncertainty
    assert out["scale"].startswith("points") and list(out["agents"]) == r.agents == ["x", "y"]
    x = out["agents"]["x"]
    assert x["mean"] == 100 * r.means["x"] and x["ci95"] == [100 * u.ci95["x"][0], 100 * u.ci95["x"][1]]
    assert x["n_tasks"] == 20 and x["rank"] == 1 and x["ci95_reason"] is None
    (c,) = out["comparisons"]
    assert set(c) == set(u.comparisons[0].as_json()) and c["diff"] == 100 * u.comparisons[0].diff
    assert out["domains"]["d1"]["x"]["n_tasks"] == 20 and out["groups"] in ([["x"], ["y"]], [["x", "y"]])


def test_dimensions_rank_separately_the_chosen_one_first():
    rng = np.random.default_rng(6)
    agents = {"x": scores(rng), "y": scores(rng)}
    tabs = [table("agg_scores_analysis.csv", None, agents, dimension="analysis"),
            table("agg_scores_total.csv", None, {a: {t: v / 2 for t, v in s.items()} for a, s in agents.items()})]
    lb = leaderboard(tabs, n_resamples=200)
    assert [r.dimension for r in lb.rankings[0]] == ["total", "analysis"] and lb.notes == []
    assert set(leaderboard_json(lb)["dimensions"]) == {"analysis"}
    assert [r.dimension for r in leaderboard(tabs, dimension="analysis", n_resamples=200).rankings[0]][0] == "analysis"
    with pytest.raises(LifesearchError, match="--dimension presentation: the sources have analysis, total"):
        leaderboard(tabs, dimension="presentation")


def test_an_agent_in_two_sources_is_named_by_its_source():
    rng = np.random.default_rng(7)
    (r,), = leaderboard([table("runA", "j", {"x": scores(rng)}), table("runB", "j", {"x": scores(rng)})],
                        n_resamples=200).rankings
    assert sorted(r.agents) == ["x (runA)", "x (runB)"]


def test_unknown_task_ids_are_refused():
    with pytest.raises(LifesearchError, match="1 id"):
        select_tasks([table("s", None, {"x": {"t1": 0.5}})], {"t1", "nope"})


def test_more_systems_than_the_cap_are_refused_before_any_resampling():
    """Pairs grow with the square of the systems: past MAX_AGENTS, one line (the count and the cap),
    raised before a single resample is drawn (no time, no memory spent)."""
    many = {f"s{k}": {"t0": 0.5, "t1": 0.25} for k in range(stats.MAX_AGENTS + 1)}
    with pytest.raises(LifesearchError, match=f"{stats.MAX_AGENTS + 1} systems.*at most {stats.MAX_AGENTS}"):
        leaderboard([table("wide.csv", None, many)], n_resamples=10**9)  # 10^9 resamples: any draw would not return


def test_groups_of_many_agents_none_apart_is_one_group():
    """300 agents none of which differ: one group of all (the run from the first agent covers them)."""
    agents = [f"s{k}" for k in range(300)]
    assert indistinct_groups(agents, []) == [agents]
    held = [stats.Comparison("s0", "s1", 0.1, (0.05, 0.15), 0.001, 0.01, 3)]
    assert indistinct_groups(agents, held) == [["s0"], agents[1:]]


def test_the_blocked_dimension_is_ranked_lowest_first_and_the_others_are_not():
    """DRB II's agg_scores_blocked.csv (a rate: lower is better) ranked the worst system first."""
    low, high = {"t0": 0.1, "t1": 0.2, "t2": 0.15}, {"t0": 0.6, "t1": 0.7, "t2": 0.65}
    lb = leaderboard([table("agg_scores_total.csv", None, {"p": high, "q": low}),
                      table("agg_scores_blocked.csv", None, {"p": high, "q": low}, dimension="blocked")],
                     n_resamples=100)
    total, blocked = lb.rankings[0]
    assert (total.agents, total.lower_is_better) == (["p", "q"], False)
    assert (blocked.agents, blocked.lower_is_better) == (["q", "p"], True)
    assert leaderboard_json(lb)["dimensions"]["blocked"]["better"] == "lower"
    assert leaderboard_json(lb)["better"] == "higher"
    from lifesearch_local.output.leaderboard import ranking_table

    assert [c.header for c in ranking_table(total, [blocked]).columns][-1] == "blocked [95% CI] (lower is better)"
