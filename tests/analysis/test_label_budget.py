"""Non-inferiority's level and power, and the label budget's sample sizes, checked by simulation.

Design: reports of m = 10 labelled decisions; in each report each judge is right with its own chance
a ~ Beta(17, 3) (mean 0.85; a report-level skill, independent between judges), X's chance lowered by
`shift`. So accuracy(X) − accuracy(R) = −shift exactly, the discordance is 2·(0.85 − 0.85²) = 0.255 and
the intra-report correlation of c = [X right] − [R right] is 2·var(a)/0.255.
Monte-Carlo bound: rates over R replications are asserted within 3 binomial standard deviations,
3·√(p(1 − p)/R), of the nominal p (one-sided where the guarantee is one-sided).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lifesearch_local.analysis.certify import non_inferiority_sums
from lifesearch_local.analysis.label_budget import (
    design_effect,
    discordance_if_independent,
    plan_non_inferiority,
    plan_ppi,
    reports_needed,
)
from lifesearch_local.analysis.ppi import ppi_arrays

M_RUBRICS = 10
A, B_ = 17.0, 3.0
VAR_A = A * B_ / ((A + B_) ** 2 * (A + B_ + 1))
ICC = 2 * VAR_A / discordance_if_independent(0.85, 0.85)


def mc(p: float, reps: int) -> float:
    return 3 * math.sqrt(p * (1 - p) / reps)


def pilot(rng: np.random.Generator, reports: int, shift: float = 0.0) -> np.ndarray:
    """reports × [decisions, X right, R right]."""
    ax = rng.beta(A, B_, reports) - shift
    ar = rng.beta(A, B_, reports)
    x = rng.binomial(M_RUBRICS, np.clip(ax, 0, 1))
    r = rng.binomial(M_RUBRICS, ar)
    return np.c_[np.full(reports, M_RUBRICS), x, r].astype(float)


def verdicts(seed: int, reps: int, reports: int, shift: float, margin: float, alpha: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.array([non_inferiority_sums(pilot(rng, reports, shift), margin, n_resamples=1000, seed=i,
                                          alpha=alpha)["verdict"] for i in range(reps)])


@pytest.mark.parametrize("alpha", [0.025, 0.05])
def test_non_inferiority_keeps_its_one_sided_level_at_a_true_difference_of_minus_the_margin(alpha):
    reps = 400
    got = verdicts(21, reps, reports=60, shift=0.10, margin=10.0, alpha=alpha)
    assert np.mean(got == "non-inferior") <= alpha + mc(alpha, reps)


def test_the_reports_needed_give_the_promised_power():
    big = pilot(np.random.default_rng(22), 3000)
    k = reports_needed(big[:, 1] - big[:, 2], big[:, 0], 5.0)["reports_needed"]
    planned = plan_non_inferiority(0.85, 0.85, margin=5.0, rubrics_per_report=M_RUBRICS, icc=ICC)["reports_needed"]
    assert abs(k - planned) / planned < 0.15  # the pilot's own estimate and the planner agree
    reps = 400
    power = np.mean(verdicts(23, reps, reports=planned, shift=0.0, margin=5.0, alpha=0.025) == "non-inferior")
    assert abs(power - 0.80) <= mc(0.80, reps), (planned, power)


def test_the_planner_by_hand():
    got = plan_non_inferiority(0.9, 0.9, margin=2.0, rubrics_per_report=10, icc=0.1)
    z = 1.959963984540054 + 0.8416212335729143
    want = z**2 * 0.18 * 1.9 / 0.02**2
    assert got["decisions_needed"] == math.ceil(want) and got["reports_needed"] == math.ceil(want / 10)
    assert got["design_effect"] == pytest.approx(design_effect(10, 0.1)) == pytest.approx(1.9)
    assert plan_non_inferiority(0.8, 0.9, margin=5.0, rubrics_per_report=10, icc=0.1)["reports_needed"] is None
    with pytest.raises(ValueError, match="impossible"):
        plan_non_inferiority(0.9, 0.7, margin=2.0, rubrics_per_report=10, icc=0.0, discordance=0.1)


def test_the_ppi_planner_gives_the_half_width_it_promises():
    """Task scores with sd σ = 0.2, a judge correlated ρ = 0.8 with them; the planned n labelled tasks
    (among 2,000 unlabelled) give a mean half-width within 5% of the asked 0.03."""
    sigma, rho, h, big_n = 0.2, 0.8, 0.03, 2000
    n = plan_ppi(sigma, rho, h, n_unlabelled=big_n)["labelled_tasks_needed"]
    rng = np.random.default_rng(24)
    y = 0.5 + sigma * rng.standard_normal((500, n + big_n))
    f = 0.5 + rho * (y - 0.5) + sigma * math.sqrt(1 - rho**2) * rng.standard_normal(y.shape)
    _, half, _ = ppi_arrays(y[:, :n], f[:, :n], f[:, n:])
    assert abs(half.mean() - h) / h < 0.05, (n, half.mean())
    assert plan_ppi(sigma, 0.0, h)["labelled_tasks_needed"] == plan_ppi(sigma, 0.0, h)["labels_only_tasks"]


def test_a_degenerate_pilot_says_why():
    same = np.c_[np.full(5, 10.0), np.full(5, 9.0), np.full(5, 9.0)]
    assert reports_needed(same[:, 1] - same[:, 2], same[:, 0], 2.0)["reports_needed"] is None
