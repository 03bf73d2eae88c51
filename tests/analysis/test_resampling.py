"""Resampling statistics that can fail: coverage and type-I error by simulation, widths, hand-computed tests.

Every simulation has a fixed seed, so a pass or a failure reproduces exactly. The coverage
check is run on a deliberately wrong interval too (decisions resampled one by one instead of
tasks) and must reject it: a check that passes everything would be a defect."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lifesearch_local.analysis import resampling as stats

N_SETS = 1000
TRUE_SCORE = 0.6  # E[task score] of the simulation: Beta(3, 2) difficulty, Bernoulli rubrics


def simulate(rng: np.random.Generator, n_sets: int, n_tasks: int, n_rubrics: int = 12, runs: int = 3) -> np.ndarray:
    """n_sets × n_tasks × runs × n_rubrics 0/1 decisions: a task's rubrics and runs share its difficulty
    q ~ Beta(3, 2) (mean 0.6), so the true score (mean over the task population) is exactly 0.6."""
    q = rng.beta(3.0, 2.0, size=(n_sets, n_tasks, 1, 1))
    return (rng.random((n_sets, n_tasks, runs, n_rubrics)) < q).astype(np.float64)


def ci_tasks(y: np.ndarray, seed: int) -> np.ndarray:
    """The right interval: tasks resampled with all their runs and rubrics (what `score` does)."""
    return stats.mean_ci(y.mean(axis=(1, 2)), n_resamples=1000, seed=seed)[0]


def ci_rubrics(y: np.ndarray, seed: int) -> np.ndarray:
    """A wrong interval: rubrics resampled instead of tasks (every (task, rubric) decision, averaged
    over runs, as if independent); its mean is the same score."""
    return stats.mean_ci(y.mean(axis=1).reshape(-1), n_resamples=1000, seed=seed)[0]


def coverage(ci_fn, n_tasks: int = 30) -> float:
    sets = simulate(np.random.default_rng(7), N_SETS, n_tasks)
    cis = np.array([ci_fn(sets[i], seed=i) for i in range(N_SETS)])
    return float(np.mean((cis[:, 0] <= TRUE_SCORE) & (cis[:, 1] >= TRUE_SCORE)))


@pytest.mark.parametrize(("ci_fn", "right"), [(ci_tasks, True), (ci_rubrics, False)], ids=["tasks", "rubrics-wrong"])
def test_coverage_of_the_task_bootstrap(ci_fn, right):
    """1,000 simulated benchmarks with a known true score: the 95% CI must cover it 93–97% of the
    time; the rubric-level interval (too narrow: it ignores that a task's rubrics are correlated)
    must fail the same check."""
    cov = coverage(ci_fn)
    assert (0.93 <= cov <= 0.97) is right, f"coverage {cov:.3f}"
    if not right:
        assert cov < 0.8  # not a near miss: the wrong interval is badly too narrow


def test_width_shrinks_as_one_over_root_n():
    rng = np.random.default_rng(11)
    widths = {}
    for n in (100, 400, 1600):
        y = simulate(rng, 1, n)[0].mean(axis=(1, 2))
        lo, hi = stats.mean_ci(y)[0]
        widths[n] = hi - lo
    assert widths[100] / widths[400] == pytest.approx(2.0, rel=0.12)
    assert widths[400] / widths[1600] == pytest.approx(2.0, rel=0.12)


def test_percentile_interval_of_a_known_sample():
    samples = np.arange(1001, dtype=float)  # quantiles 2.5% and 97.5% of 0..1000 are 25 and 975
    assert stats.percentile_ci(samples)[0] == pytest.approx([25.0, 975.0])
    assert stats.percentile_ci(np.array([np.nan, 1.0, 1.0]))[0].tolist() == [1.0, 1.0]  # NaN resamples left out


def test_expanded_percentile_tail():
    """α' of the expanded percentile interval: 2·Φ(−√(n/(n−1))·t_{n−1}(.975)), by hand for n = 11."""
    from statistics import NormalDist

    t10 = 2.2281388519649385  # t quantile .975 with 10 degrees of freedom
    assert stats.expanded_alpha(11) == pytest.approx(2 * NormalDist().cdf(-((11 / 10) ** 0.5) * t10), rel=1e-9)
    assert stats.expanded_alpha(None) == pytest.approx(0.05) and stats.expanded_alpha(1) == pytest.approx(0.05)
    assert 0.05 > stats.expanded_alpha(400) > 0.049  # tends to the nominal tail


def test_resample_counts_draw_n_units_per_resample():
    c = stats.resample_counts(7, 500, np.random.default_rng(0))
    assert c.shape == (500, 7) and (c.sum(axis=1) == 7).all()
    assert 0.9 < c.mean() / 1.0 < 1.1  # each unit drawn once per resample on average


# -- paired comparisons ---------------------------------------------------------------------
def test_sign_flip_type_one_error_is_five_percent():
    """Null data (two agents' task scores exchangeable): p < 0.05 in about 5% of 1,000 sets."""
    rng = np.random.default_rng(3)
    q = rng.beta(3.0, 2.0, size=(N_SETS, 40))
    a = rng.binomial(12, q) / 12
    b = rng.binomial(12, q) / 12
    p = np.array([stats.sign_flip_p(a[i] - b[i], n_resamples=1000, seed=i)[0] for i in range(N_SETS)])
    assert 0.035 <= np.mean(p < 0.05) <= 0.065, np.mean(p < 0.05)
    # and it is not a test that never rejects: a 10-point shift is found almost always
    shifted = np.clip(a + 0.10, 0, 1)
    p1 = np.array([stats.sign_flip_p(shifted[i] - b[i], n_resamples=1000, seed=i)[0] for i in range(200)])
    assert np.mean(p1 < 0.05) > 0.8


def test_sign_flip_exact_by_hand():
    # d = (1, 2, 3): |mean| = 2; of the 8 sign vectors only (+,+,+) and (−,−,−) reach |mean| ≥ 2
    assert stats.sign_flip_p(np.array([1.0, 2.0, 3.0]))[0] == pytest.approx(2 / 8)
    # d = (1, 1, 1, −3): mean 0, every vector reaches it
    assert stats.sign_flip_p(np.array([1.0, 1.0, 1.0, -3.0]))[0] == 1.0


def test_identical_agents_give_zero_difference_and_p_one():
    rng = np.random.default_rng(5)
    tids = [f"t{i}" for i in range(50)]
    scores = dict(zip(tids, rng.random(50).tolist(), strict=True))
    other = dict(zip(tids, rng.random(50).tolist(), strict=True))
    u = stats.score_uncertainty({"a": scores, "copy": dict(scores), "b": other}, {x: set(tids) for x in ("a", "copy", "b")},
                                dict.fromkeys(tids, "company"))
    same = next(c for c in u.comparisons if {c.a, c.b} == {"a", "copy"})
    assert same.diff == 0.0 and same.p_value == 1.0 and same.p_holm == 1.0
    # a copy differs by 0 on every task: no spread, so no interval rather than [0, 0] (which reads as certainty)
    assert np.isnan(same.ci95).all() and same.ci_reason == "no spread: no interval"
    assert same.as_json()["ci95"] is None and same.as_json()["ci95_reason"] == same.ci_reason
    assert not same.holds and same.n_tasks == 50


def test_pairs_use_only_shared_tasks():
    tids = ["t1", "t2", "t3", "t4"]
    a = {"t1": 1.0, "t2": 1.0, "t3": 0.0, "t4": 0.0}
    b = {"t1": 0.0, "t2": 0.5, "t3": 0.0, "t4": 0.0}
    u = stats.score_uncertainty({"a": a, "b": b}, {"a": {"t1", "t2", "t3", "t4"}, "b": {"t1", "t2"}},
                                dict.fromkeys(tids, "policy"))
    (c,) = u.comparisons
    assert c.n_tasks == 2 and c.diff == pytest.approx(0.75)  # (1 − 0 + 1 − 0.5) / 2
    assert c.p_value == pytest.approx(0.5)  # exact over 4 sign vectors: (+,+) and (−,−) reach 0.75


def test_one_task_gives_no_interval_and_says_why():
    """One task resamples to itself: every interval would be [x, x]; there is none, with the reason."""
    u = stats.score_uncertainty({"a": {"t1": 0.179}, "b": {"t1": 0.051}}, domains={"t1": "policy"})
    assert np.isnan(u.ci95["a"]).all() and u.ci_reason == {"a": "n=1: no interval", "b": "n=1: no interval"}
    (c,) = u.comparisons
    assert c.diff == pytest.approx(0.128) and np.isnan(c.ci95).all() and c.ci_reason == "n=1: no interval"
    assert u.domain_ci_reason["a"] == {"policy": "n=1: no interval"} and u.domain_n_tasks["a"] == {"policy": 1}
    # two tasks with the same score: an interval of zero width, so none either
    flat = stats.score_uncertainty({"a": {"t1": 1.0, "t2": 1.0}, "b": {"t1": 0.5, "t2": 0.0}})
    assert flat.ci_reason == {"a": "no spread: no interval"} and flat.ci95["b"][0] < flat.ci95["b"][1]


def test_no_interval_reasons():
    assert stats.no_interval((0.2, 0.2), 1) == "n=1: no interval"
    assert stats.no_interval((0.2, 0.2), 5) == "no spread: no interval"
    assert stats.no_interval(None, 5) == "undefined: no interval"
    assert stats.no_interval((0.1, 0.3), 5) is None


def test_missing_cells_leave_a_task_out_of_that_agent_and_its_pairs_only():
    """A published table with an empty cell: the agent's mean interval is over its own tasks, its
    pairs over the tasks both have; agents with every task keep the shared draw (their numbers
    are those of the table without the gappy agent)."""
    rng = np.random.default_rng(3)
    tids = [f"t{i}" for i in range(12)]
    full = {a: dict(zip(tids, rng.random(12).tolist(), strict=True)) for a in "xy"}
    gappy = {t: v for t, v in zip(tids, rng.random(12).tolist(), strict=True) if t not in ("t3", "t7")}
    u = stats.score_uncertainty({**full, "g": gappy})
    alone = stats.score_uncertainty(full)
    assert {a: u.ci95[a] for a in "xy"} == alone.ci95 and u.n_tasks == {"x": 12, "y": 12, "g": 10}
    want = stats.percentile_ci(stats.bootstrap_means(np.array(list(gappy.values())), stats.DEFAULT_RESAMPLES,
                                                     stats.DEFAULT_SEED, 0, stats.name_stream(*gappy)), n_units=10)[0]
    assert u.ci95["g"] == tuple(want)
    pairs = {(c.a, c.b): c for c in u.comparisons}
    xy, xy_alone = pairs[("x", "y")], alone.comparisons[0]
    assert xy.n_tasks == 12 and (xy.diff, xy.ci95, xy.p_value) == (xy_alone.diff, xy_alone.ci95, xy_alone.p_value)
    xg = pairs[("x", "g")]
    assert xg.n_tasks == 10 and xg.diff == pytest.approx(np.mean([full["x"][t] - gappy[t] for t in gappy]))


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04, 0.5 × (4, 3, 2, 1) = .04, .09, .08, .5 → monotone .04, .09, .09, .5
    assert stats.holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert stats.holm([0.9, 0.8]) == [1.0, 1.0] and stats.holm([]) == []


def test_same_input_same_output_byte_for_byte():
    rng = np.random.default_rng(9)
    tids = [f"t{i}" for i in range(30)]
    scores = {a: dict(zip(tids, rng.random(30).tolist(), strict=True)) for a in "xyz"}
    judged = {a: set(tids) for a in scores}
    doms = {t: ("policy", "company")[i % 2] for i, t in enumerate(tids)}
    runs = [stats.score_uncertainty(scores, judged, doms) for _ in range(2)]
    dump = [json.dumps([u.ci95, u.domain_ci95, [c.as_json() for c in u.comparisons], u.settings()]) for u in runs]
    assert dump[0] == dump[1]
    other_seed = stats.score_uncertainty(scores, judged, doms, seed=1)
    assert other_seed.ci95 != runs[0].ci95  # the seed is used
    # adding an agent changes no other agent's interval (one shared task resampling)
    more = stats.score_uncertainty({**scores, "w": scores["x"]}, {**judged, "w": set(tids)}, doms)
    assert {a: more.ci95[a] for a in "xyz"} == runs[0].ci95


# -- agreement ------------------------------------------------------------------------------
def test_mcnemar_exact_by_hand():
    assert stats.mcnemar_exact(1, 6) == pytest.approx(2 * 8 / 128)  # P(X ≤ 1), X ~ Bin(7, ½) = 8/128
    assert stats.mcnemar_exact(5, 0) == pytest.approx(2 / 32)
    assert stats.mcnemar_exact(3, 3) == 1.0 and stats.mcnemar_exact(0, 0) == 1.0


def test_holm_keeps_the_family_wise_error_over_fifteen_pairs():
    """Six agents with the same true score (tasks shared, a task difficulty each): the chance that any of
    the 15 pairs holds at 0.05 after Holm is at most 5% (within 3 binomial sd over 400 sets)."""
    rng = np.random.default_rng(31)
    agents = [f"a{i}" for i in range(6)]
    tids = [f"t{i}" for i in range(30)]
    judged = {a: set(tids) for a in agents}
    reps, any_false = 400, 0
    for rep in range(reps):
        m = np.clip(rng.beta(3, 2, (30, 1)) + 0.1 * rng.standard_normal((30, 6)), 0, 1)
        comps = stats.compare_agents(m, tids, agents, judged, n_resamples=500, seed=rep)
        any_false += any(c.holds for c in comps)
    assert any_false / reps <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)


# -- memory: pairs summarised as they are drawn ---------------------------------------------
def _all_pairs_reference(m, tids, agents, judged, n_resamples, seed):
    """The former all-pairs computation (every pair's resamples held at once), kept here as the
    reference the bounded one must match exactly."""
    import itertools

    pairs = list(itertools.combinations(range(len(agents)), 2))
    groups: dict = {}
    for k, (i, j) in enumerate(pairs):
        shared = tuple(r for r, t in enumerate(tids) if t in judged[agents[i]] and t in judged[agents[j]])
        groups.setdefault(shared, []).append(k)
    diff, ci, p, n = np.full(len(pairs), np.nan), np.full((len(pairs), 2), np.nan), np.ones(len(pairs)), [0] * len(pairs)
    for rows, ks in groups.items():
        d = np.stack([m[list(rows), pairs[k][0]] - m[list(rows), pairs[k][1]] for k in ks], axis=1)
        for k in ks:
            n[k] = len(rows)
        if not rows:
            continue
        stream = stats.name_stream(*(tids[r] for r in rows))
        diff[ks] = d.mean(axis=0)
        ci[ks] = stats.percentile_ci(stats.bootstrap_means(d, n_resamples, seed, 2, stream), n_units=len(rows))
        p[ks] = stats.sign_flip_p(d, n_resamples, seed, 3, stream)
    return diff, ci, p, n


@pytest.mark.parametrize("n_tasks", [3, 16])  # 3: exact sign flips (2^3 ≤ B); 16: random ones
def test_pairs_in_bounded_blocks_match_the_all_pairs_computation(monkeypatch, n_tasks):
    """Pairs are drawn in blocks of a bounded number of columns (memory ∝ resamples × block, not ×
    pairs); the numbers are those of holding every pair's resamples at once, to the last bit, with
    gaps in the table (several shared-task sets) and a block smaller than one set's pairs. The mean
    difference may move in its last bit (it was summed with its neighbours' columns), no more."""
    rng = np.random.default_rng(5)
    tids = [f"t{i}" for i in range(n_tasks)]
    agents = [f"s{k}" for k in range(9)]
    m = rng.random((n_tasks, len(agents)))
    m[1, 4] = m[2, 7] = np.nan
    judged = {a: {t for r, t in enumerate(tids) if not np.isnan(m[r, k])} for k, a in enumerate(agents)}
    monkeypatch.setattr(stats, "BLOCK_CELLS", 500 * 5)  # 5 pairs a block at 500 resamples
    got = stats.compare_agents(m, tids, agents, judged, n_resamples=500, seed=11)
    diff, ci, p, n = _all_pairs_reference(m, tids, agents, judged, 500, 11)
    assert len(got) == 36 and [c.n_tasks for c in got] == n
    assert [c.diff for c in got] == pytest.approx(diff.tolist(), rel=1e-14, abs=1e-15)
    assert [c.p_value for c in got] == p.tolist()
    assert [c.ci95 for c in got] == [stats.checked(c, k)[0] for c, k in zip(ci, n, strict=True)]
