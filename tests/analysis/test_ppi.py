"""PPI++ task-level scores: hand-computed cases, and coverage by simulation (2,000 sets per judge, fixed seed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lifesearch_local.analysis.ppi import agent_ppi, finite_population_arrays, ppi_arrays, ppi_mean_ci
from lifesearch_local.analysis.scoring import score_agents
from lifesearch_local.records import Judgment, Task
from tests.helpers.inputs import rubric, task

SETS = 2000  # coverage SE ≈ √(0.95·0.05/2000) ≈ 0.5%: 93–97% is ±4 SE around 95%
TASKS, LABELLED, RUBRICS = 400, 80, 10
TRUE_MEAN = 0.5  # E[share of 10 rubrics] with difficulty ~ Beta(2, 2)
Z = 1.959963984540054


# -- hand-computed -----------------------------------------------------------------------------
def test_a_hand_computed_set():
    # cov(y, f) = 0.25 (1/n), var(f ∪ f~) = 0.25 (n − 1), n/N = 1 → λ = 0.25 / (2·0.25) = 0.5;
    # θ = 0.5·mean(1, 1) + mean(1 − 0.5, 0 − 0) = 0.75; se² = 0.25·0/2 + var(0.5, 0)/2 = 0.03125
    r = ppi_mean_ci([1.0, 0.0], [1.0, 0.0], [1.0, 1.0], min_labelled=2)
    assert r.lam == pytest.approx(0.5) and r.mean == pytest.approx(0.75)
    half = Z * math.sqrt(0.03125)
    assert r.ci95 == pytest.approx((0.75 - half, 0.75 + half))
    assert (r.n_labelled, r.n_unlabelled, r.reason) == (2, 2, None)


def test_lambda_zero_is_the_labels_only_interval_and_one_is_plain_ppi():
    y, f, fu = [0.2, 0.9, 0.4, 0.7], [0.3, 0.6, 0.5, 0.9], [0.1, 0.8, 0.4]
    r0 = ppi_mean_ci(y, f, fu, lam=0.0, min_labelled=2)
    sd = np.std(y) / 2
    assert r0.mean == pytest.approx(np.mean(y)) and r0.ci95 == pytest.approx((np.mean(y) - Z * sd, np.mean(y) + Z * sd))
    r1 = ppi_mean_ci(y, f, fu, lam=1.0)
    assert r1.mean == pytest.approx(np.mean(fu) + np.mean(np.subtract(y, f)))


def test_a_constant_judge_gets_no_weight_and_an_all_labelled_set_is_labels_only():
    assert ppi_mean_ci([0.2, 0.9, 0.4], [0.5, 0.5, 0.5], [0.5, 0.5]).lam == 0.0  # nothing to learn from it
    r = ppi_mean_ci([0.2, 0.9, 0.4], [0.1, 0.8, 0.5], [])
    assert r.lam == 0.0 and r.mean == pytest.approx(0.5) and r.n_unlabelled == 0


def test_no_interval_without_two_labelled_tasks_or_without_spread():
    none = ppi_mean_ci([], [], [0.3, 0.4])
    assert none.mean is None and none.ci95 is None and "no labelled task" in none.reason
    one = ppi_mean_ci([0.5], [0.4], [0.3, 0.4], min_labelled=0)
    assert one.ci95 is None and one.reason.startswith("n=1 labelled task: no interval")
    few = ppi_mean_ci([0.2, 0.9, 0.4], [0.1, 0.8, 0.5], [0.3, 0.4])  # 3 < MIN_LABELLED: a mean, no interval
    assert few.mean is not None and few.ci95 is None and "needs 30" in few.reason
    flat = ppi_mean_ci([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0], min_labelled=2)
    assert flat.mean == 1.0 and flat.ci95 is None and "no spread" in flat.reason  # never a zero-width interval


# -- from judgments and labels -------------------------------------------------------------------
def test_agent_ppi_uses_fully_labelled_tasks_and_counts_partial_ones():
    tasks = [Task.model_validate(task(f"t{i}", [rubric("R1", 1.0), rubric("R2", 1.0)])) for i in range(4)]
    judged = {"t0": (True, True), "t1": (True, False), "t2": (False, False), "t3": (True, True)}
    js = [Judgment(task_id=t, agent="a", run=0, rubric_id=f"R{k + 1}", judge="x", satisfied=v)
          for t, vs in judged.items() for k, v in enumerate(vs)]
    row = score_agents(tasks, js)["a"]
    # humans: t0 → 0.5, t1 → 0.0 (both rubrics); t2 only R1 labelled (partial: left out)
    labels = {("t0", "a", 0, "R1"): True, ("t0", "a", 0, "R2"): False, ("t1", "a", 0, "R1"): False,
              ("t1", "a", 0, "R2"): False, ("t2", "a", 0, "R1"): True}
    out = agent_ppi(tasks, row, labels)
    expect = ppi_mean_ci([0.5, 0.0], [1.0, 0.5], [0.0, 1.0])  # labelled t0, t1; unlabelled t2, t3 (judge only)
    assert out["mean"] == pytest.approx(expect.mean) and out["ci95"] is None and "needs 30" in out["ci95_reason"]
    assert out["n_labelled_tasks"] == 2 and out["n_unlabelled_tasks"] == 2 and out["partly_labelled_tasks"] == 1
    assert out["judge_only"] == pytest.approx(0.625) and out["labels_only"] == pytest.approx(0.25)
    assert out["labels_only_ci95"] is None and "superpopulation" in out["estimand"]


# -- simulation ------------------------------------------------------------------------------------
def simulate(judge, seed: int, difficulty=(2, 2)) -> tuple[np.ndarray, np.ndarray]:
    """SETS benchmarks of TASKS tasks: human task scores y (shares of 10 rubrics) and the judge's f."""
    rng = np.random.default_rng(seed)
    p = rng.beta(*difficulty, size=(SETS, TASKS))
    y = rng.binomial(RUBRICS, p) / RUBRICS
    return y, judge(rng, y, p)


def good(rng, y, p):  # decides each rubric right 90% of the time, symmetric errors
    k = np.rint(y * RUBRICS).astype(int)
    return (rng.binomial(k, 0.9) + rng.binomial(RUBRICS - k, 0.1)) / RUBRICS


def biased(rng, y, p):  # misses 30% of the satisfied rubrics: this agent's scores come out too low
    return rng.binomial(np.rint(y * RUBRICS).astype(int), 0.7) / RUBRICS


def useless(rng, y, p):  # unrelated to the report
    return rng.binomial(RUBRICS, 0.5, size=y.shape) / RUBRICS


def ppi(y, f):
    mean, half, _ = ppi_arrays(y[:, :LABELLED], f[:, :LABELLED], f[:, LABELLED:])
    return mean, half


def labels_only(y, f):
    mean, half, _ = ppi_arrays(y[:, :LABELLED], f[:, :LABELLED], f[:, LABELLED:], lam=0.0)
    return mean, half


def judge_only(y, f):  # the naive interval: the judge's scores as if they were the truth
    return f.mean(1), Z * f.std(1) / math.sqrt(TASKS)


def no_rectifier(y, f):  # PPI with its rectifier dropped: deliberately broken
    fu = f[:, LABELLED:]
    return fu.mean(1), Z * fu.std(1) / math.sqrt(fu.shape[1])


def coverage(estimator, y, f, truth: float) -> tuple[float, float]:
    mean, half = estimator(y, f)
    return float(np.mean(np.abs(mean - truth) <= half)), float(np.mean(2 * half))


def covers(estimator, y, f, truth: float) -> bool:
    """The check a valid 95% interval must pass on SETS simulated benchmarks."""
    return 0.93 <= coverage(estimator, y, f, truth)[0] <= 0.97


def test_a_judge_biased_against_one_agent():
    # agent A: a judge that is right 90% of the time; agent B (difficulty Beta(3, 2), true mean 0.6): the
    # same judge misses 30% of what B's reports satisfy
    ya, fa = simulate(good, 1)
    yb, fb = simulate(biased, 2, difficulty=(3, 2))
    assert covers(ppi, ya, fa, TRUE_MEAN) and covers(ppi, yb, fb, 0.6)
    assert coverage(judge_only, yb, fb, 0.6)[0] < 0.01  # the naive interval almost never holds B's true score
    assert not covers(no_rectifier, yb, fb, 0.6)  # the check catches the broken estimator


def test_a_good_judge_narrows_the_labels_only_interval():
    y, f = simulate(good, 3)
    assert covers(ppi, y, f, TRUE_MEAN) and covers(labels_only, y, f, TRUE_MEAN)
    w_ppi, w_lab = coverage(ppi, y, f, TRUE_MEAN)[1], coverage(labels_only, y, f, TRUE_MEAN)[1]
    assert w_ppi < 0.75 * w_lab  # 80 labels + 320 judged tasks beat 80 labels alone


def test_a_useless_judge_costs_at_most_a_few_percent_of_width():
    y, f = simulate(useless, 4)
    assert covers(ppi, y, f, TRUE_MEAN)
    w_ppi, w_lab = coverage(ppi, y, f, TRUE_MEAN)[1], coverage(labels_only, y, f, TRUE_MEAN)[1]
    assert w_ppi <= 1.03 * w_lab  # λ ≈ 0: about the labels-only interval (a chance correlation may even narrow it)


def fpc(y, f):
    mean, half, _ = finite_population_arrays(y[:, :LABELLED], f[:, :LABELLED], f[:, LABELLED:])
    return mean, half


@pytest.mark.parametrize("judge", [good, biased, useless])
def test_the_finite_population_interval_covers_the_mean_of_these_tasks(judge):
    """The estimand "these tasks": each simulated benchmark's own mean of the human scores. PPI++'s
    superpopulation interval over-covers it (it also pays for drawing the tasks); the finite-population
    one is at its level (within 3 binomial sd of 95% over SETS benchmarks: 93.5-96.5%)."""
    y, f = simulate(judge, 17)
    here = y.mean(1)
    mean, half = fpc(y, f)
    cover = float(np.mean(np.abs(mean - here) <= half))
    assert abs(cover - 0.95) <= 3 * math.sqrt(0.05 * 0.95 / SETS), cover
    sup_mean, sup_half = ppi(y, f)
    assert np.mean(np.abs(sup_mean - here) <= sup_half) > cover and np.mean(half) < np.mean(sup_half)


def test_labels_only_comes_with_its_interval():
    rng = np.random.default_rng(3)
    y, f = rng.random(40), rng.random(40)
    out = ppi_mean_ci(y, f, rng.random(100), lam=0.0)
    assert out.mean == pytest.approx(y.mean())
    assert out.ci95[1] - out.ci95[0] == pytest.approx(2 * 1.959963984540054 * y.std() / math.sqrt(40))
