"""The Bias Index by simulation (known true index 0 and 20) and on hand-made cases.

Monte-Carlo bound used throughout: a rate measured over R replications is asserted within 3 binomial
standard deviations, 3·√(p(1 − p)/R), of its nominal p (a check that fails by chance about 3 times in
1,000); a one-sided guarantee (coverage ≥ 95%) only on its lower side.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lifesearch_local.analysis import resampling as stats
from lifesearch_local.analysis.bias_index import bias_index, equal_shifts_test, influences, shift_covariance
from tests.helpers.bias import BIAS_20, simulate

REPS = 1000


def mc(p: float, reps: int = REPS) -> float:
    """Three binomial standard deviations of a rate p measured over `reps` replications."""
    return 3 * math.sqrt(p * (1 - p) / reps)


def run(seed: int, **kw) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    got = [bias_index(*simulate(rng, **kw), margin=2.0) for _ in range(REPS)]
    return {k: np.array([g[k] for g in got], dtype=float) for k in ("value", "corrected", "upper95", "lower95",
                                                                    "equal_shifts_p_value")}


def old_interval(x: np.ndarray, r: np.ndarray, seed: int, n_resamples: int = 400) -> np.ndarray:
    """The interval certify gave before: the percentile interval of max − min of the bootstrapped shifts."""
    counts = stats.resample_counts(len(x), n_resamples, stats.rng_for(seed, 1))
    d = 100 * (counts @ (x - r)) / len(x)
    return stats.percentile_ci(d.max(axis=1) - d.min(axis=1), n_units=len(x))[0]


@pytest.fixture(scope="module")
def at_zero():
    return run(1)


def test_equal_shifts_test_rejects_at_its_level_when_the_index_is_zero(at_zero):
    rate = float(np.mean(at_zero["equal_shifts_p_value"] < 0.05))
    assert abs(rate - 0.05) <= mc(0.05), rate


def test_the_corrected_index_is_near_zero_where_the_raw_one_is_not(at_zero):
    assert at_zero["value"].mean() > 4.5  # max − min of four noisy shifts: about 2σ, σ ≈ 2.5 points
    assert at_zero["corrected"].mean() < 2.0
    assert np.all(at_zero["corrected"] >= 0) and np.all(at_zero["corrected"] <= at_zero["value"] + 1e-9)


def test_the_bounds_cover_a_true_index_of_zero(at_zero):
    assert np.mean(at_zero["upper95"] >= 0) == 1.0  # trivially: a bound on a non-negative index
    assert np.mean(at_zero["lower95"] <= 0) >= 0.95 - mc(0.95)


def test_the_old_interval_fails_the_same_check():
    """What certify gave before never contains the true 0: the coverage check above would reject it."""
    rng = np.random.default_rng(2)
    cover = np.mean([old_interval(*simulate(rng), seed=i)[0] <= 0 for i in range(100)])
    assert cover < 0.95 - mc(0.95, 100)


@pytest.mark.parametrize("agents", [2, 4])
def test_the_bounds_cover_a_true_index_of_twenty(agents):
    got = run(3 + agents, agents=agents, bias=BIAS_20)
    assert np.mean(got["upper95"] >= 20.0) >= 0.95 - mc(0.95)  # two agents: the bound is exactly one-sided 95%
    assert np.mean(got["lower95"] <= 20.0) >= 0.95 - mc(0.95)
    assert abs(got["corrected"].mean() - 20.0) < 1.5  # nearly unbiased when the shifts clearly differ
    assert np.mean(got["equal_shifts_p_value"] < 0.05) > 0.99


def test_a_large_study_of_an_identical_candidate_passes_a_two_point_margin():
    rng = np.random.default_rng(9)
    got = bias_index(*simulate(rng, tasks=1600, agents=4, rubrics=20), margin=2.0)
    assert got["verdict"] == "within" and got["upper95"] <= 2.0


def test_hotelling_by_hand_with_two_agents_is_the_paired_t_test():
    from scipy.stats import ttest_1samp

    rng = np.random.default_rng(4)
    x, r = rng.random((12, 2)), rng.random((12, 2))
    s, phi, _ = influences(x, r)
    p, _, rank = equal_shifts_test(s, shift_covariance(phi), 12)
    u = x - r
    assert rank == 1 and p == pytest.approx(ttest_1samp(u[:, 0] - u[:, 1], 0.0).pvalue)


def test_missing_cells_and_degenerate_cases():
    x = np.array([[0.5, 0.2, np.nan], [0.7, 0.4, 0.1], [0.6, np.nan, 0.3]])
    s, phi, n = influences(x, np.zeros_like(x))
    assert s == pytest.approx([0.6, 0.3, 0.2]) and list(n) == [3, 2, 2]
    assert phi[:, 1] == pytest.approx([-0.05, 0.05, 0.0])
    one = bias_index(x[:, :1], np.zeros((3, 1)))
    assert one["value"] is None and "one agent" in one["reason"]
    same = bias_index(np.full((5, 3), 0.4), np.full((5, 3), 0.4), margin=2.0)
    assert same["value"] == 0 and same["equal_shifts_p_value"] == 1.0 and same["upper95"] == 0
    assert same["verdict"] == "within"


def test_fewer_tasks_than_agents_give_bounds_but_no_test():
    rng = np.random.default_rng(0)
    got = bias_index(rng.random((3, 4)), rng.random((3, 4)), margin=2.0)
    assert got["equal_shifts_p_value"] is None and got["corrected"] is None  # not "p = 0": singular by sample size
    assert got["upper95"] > got["value"] and got["verdict"] == "inconclusive"
