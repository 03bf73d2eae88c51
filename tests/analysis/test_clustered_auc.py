"""Obuchowski's clustered AUROC interval: the point against agreement.auroc, and coverage by simulation.

Design: reports of 20 decisions, labels ~ Bernoulli(0.5), score = 1·label + u (per report, sd σ_u) + e
(sd 1), p_true = sigmoid(score). The population AUROC (pairs from different reports) is
Φ(1/√(2σ_u² + 2)). Rates over 1,000 sets are asserted within 3 binomial sd of 95% (±2.1 points).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from lifesearch_local.analysis.agreement import auroc
from lifesearch_local.analysis.clustered_auc import clustered_auc

REPS = 1000
BOUND = 3 * math.sqrt(0.05 * 0.95 / REPS)


def simulate(rng: np.random.Generator, reports: int, su: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = rng.random((reports, 20)) < 0.5
    s = 1.0 * y + su * rng.standard_normal((reports, 1)) + rng.standard_normal((reports, 20))
    return (1 / (1 + np.exp(-s))).ravel(), y.ravel(), np.repeat(np.arange(reports), 20)


def coverage(seed: int, reports: int, su: float, clustered: bool = True) -> float:
    truth = norm.cdf(1 / math.sqrt(2 * su**2 + 2))
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(REPS):
        p, y, k = simulate(rng, reports, su)
        _, ci = clustered_auc(p, y, k if clustered else np.arange(len(p)))
        hits += ci[0] <= truth <= ci[1]
    return hits / REPS


def test_the_point_is_the_mann_whitney_auroc_with_ties():
    rng = np.random.default_rng(1)
    p = rng.integers(0, 5, 300) / 4  # many ties
    y = rng.random(300) < 0.4
    a, ci = clustered_auc(p, y, rng.integers(0, 30, 300))
    assert a == pytest.approx(auroc(list(y), list(p))) and 0 <= ci[0] < a < ci[1] <= 1


@pytest.mark.parametrize(("reports", "su"), [(80, 0.8), (300, 1.5)])
def test_coverage_under_report_level_correlation(reports, su):
    assert abs(coverage(reports, reports, su) - 0.95) <= BOUND


def test_the_unclustered_delong_interval_fails_the_same_check():
    assert coverage(7, 300, 1.5, clustered=False) < 0.95 - BOUND


def test_one_class_or_one_report_gives_no_interval():
    assert clustered_auc([0.2, 0.7], [True, True], [0, 1])[1] is None
    assert clustered_auc([0.2, 0.7, 0.4], [True, False, True], [0, 0, 0])[1] is None
