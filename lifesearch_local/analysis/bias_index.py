"""The Bias Index (max − min over agents of a judge's score shift) with a bias-corrected value, a valid upper bound and a test.

max − min of noisy shifts is biased upward: with equal true shifts it is still about 2σ for four
agents (σ the standard error of one shift), so a bootstrap percentile interval of it never reaches 0
and an identical candidate would never pass a margin held against its upper end. Here, from the
task-level influence of each task on each agent's shift (a task's reports of every agent together,
the unit of resampling everywhere in certify), with T tasks and K agents:

- `value`: max − min of the shifts (points), as before;
- `equal_shifts_p_value`: Hotelling's T² (a Wald test with the F reference) of "all K shifts are
  equal" on the K − 1 contrasts s_a − s_K, covariance from the task influences;
- `corrected`: the value shrunk by the positive-part James–Stein factor max(0, 1 − r/T²) (r the rank
  of the contrasts' covariance): about 0 when the shifts are as equal as noise makes them, nearly the
  value when they differ clearly. (A bootstrap bias correction, 2θ̂ − mean θ*, still leaves about
  1.2σ at a true index of 0: measured, docs/statistics.md.) A point estimate, no interval;
- `upper95`: max over the K(K − 1)/2 pairs of |d̂_ab| + t_{T−1}(0.95)·se_ab, d̂_ab = s_a − s_b. The
  true index is |d| of one pair (the pair a*, b* that attains it), and the bound is at least that
  pair's one-sided 95% t upper bound on |d_a*b*|, so it covers the true index with probability
  ≥ 95% with no multiplicity correction (about 95% with two agents, more with several);
- `lower95`: max(0, max over pairs of |d̂_ab| − q·se_ab), q = t_{T−1}(1 − 0.05/(2m)) for m pairs
  (Bonferroni: every pair must hold at once), a one-sided 95% lower bound.
Checked by simulation in tests/analysis/test_bias_index.py.
"""

from __future__ import annotations

import math

import numpy as np

ALPHA = 0.05
"""One-sided level of `upper95` and `lower95` (each a one-sided 95% bound on the true index)."""
_TINY = 1e-12


def influences(x: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(shifts, influence, tasks per agent) from task × agent score matrices under the judge and the reference
    (0–1, NaN where the agent has no such task): shift_a = mean over its tasks of x − r; influence[t, a] =
    (u_ta − shift_a)/n_a on the agent's tasks, 0 elsewhere, so the shifts' covariance is T/(T−1)·ΦᵀΦ."""
    u = np.asarray(x, dtype=np.float64) - np.asarray(r, dtype=np.float64)
    have = ~np.isnan(u)
    n = have.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where(have, u, 0.0).sum(axis=0) / n
        phi = np.where(have, u - s, 0.0) / n
    return s, phi, n


def shift_covariance(phi: np.ndarray) -> np.ndarray:
    """K × K covariance of the agents' shifts from their task influences (the usual T/(T−1) correction)."""
    t = phi.shape[0]
    return phi.T @ phi * (t / (t - 1)) if t > 1 else np.full((phi.shape[1],) * 2, np.nan)


def equal_shifts_test(s: np.ndarray, cov: np.ndarray, n_tasks: int) -> tuple[float, float, int]:
    """(p-value, T², rank) of Hotelling's test that all shifts are equal (F(r, T − r) reference)."""
    from scipy.stats import f as f_dist

    k = len(s)
    if n_tasks < k:  # fewer tasks than contrasts + 1: the covariance is singular by sample size, no test
        return math.nan, math.nan, 0
    c = np.hstack([np.eye(k - 1), -np.ones((k - 1, 1))])
    d, v = c @ s, c @ cov @ c.T
    w, vec = np.linalg.eigh(v)
    keep = w > _TINY * max(1.0, float(np.max(np.abs(w))))
    rank = int(keep.sum())
    if rank == 0:  # no spread at all: equal shifts are certain when the contrasts are 0, refuted otherwise
        return (1.0 if np.max(np.abs(d)) < 1e-9 else 0.0), math.inf, 0
    z = vec[:, keep].T @ d
    off = vec[:, ~keep].T @ d  # a difference where no task varies: certain, not noise
    if off.size and np.max(np.abs(off)) > 1e-9:
        return 0.0, math.inf, rank
    t2 = float(np.sum(z * z / w[keep]))
    if n_tasks - rank < 1:
        return math.nan, t2, rank
    stat = (n_tasks - rank) / ((n_tasks - 1) * rank) * t2
    return float(f_dist.sf(stat, rank, n_tasks - rank)), t2, rank


def pairwise_bounds(s: np.ndarray, cov: np.ndarray, n_tasks: int, alpha: float = ALPHA) -> tuple[float, float]:
    """(lower, upper) one-sided 95% bounds on max_{a,b} |s_a − s_b| (the module docstring says why each holds)."""
    from scipy.stats import t as t_dist

    k = len(s)
    i, j = np.triu_indices(k, 1)
    d = np.abs(s[i] - s[j])
    se = np.sqrt(np.maximum(cov[i, i] + cov[j, j] - 2 * cov[i, j], 0.0))
    q_lo = float(t_dist.ppf(1 - alpha / (2 * len(d)), n_tasks - 1))
    q_hi = float(t_dist.ppf(1 - alpha, n_tasks - 1))
    return float(max(0.0, np.max(d - q_lo * se))), float(np.max(d + q_hi * se))


def bias_index(x: np.ndarray, r: np.ndarray, margin: float | None = None) -> dict:
    """The Bias Index block (points) from task × agent scores under the judge `x` and the reference `r` (0–1).

    {value, corrected, upper95, lower95, equal_shifts_p_value, method[, verdict]}: `verdict` (with a
    margin in points) is "within" when upper95 ≤ margin, "beyond" when lower95 > margin, else
    "inconclusive". None values with a `reason` below two agents or two tasks."""
    s, phi, n = influences(x, r)
    t = phi.shape[0]
    if len(s) < 2:
        return {"value": None, "corrected": None, "upper95": None, "lower95": None, "equal_shifts_p_value": None,
                "reason": "one agent: no spread of shifts"}
    value = 100 * float(np.max(s) - np.min(s))
    if t < 2 or (n < 2).any():
        return {"value": value, "corrected": None, "upper95": None, "lower95": None, "equal_shifts_p_value": None,
                "reason": "an agent with fewer than 2 tasks: no bound or test"}
    cov = shift_covariance(phi)
    p, t2, rank = equal_shifts_test(s, cov, t)
    if math.isnan(t2):
        shrink = math.nan
    elif rank == 0 or math.isinf(t2):
        shrink = 1.0 if p == 0.0 else 0.0
    else:
        shrink = max(0.0, 1.0 - rank / t2) if t2 > 0 else 0.0
    lo, hi = pairwise_bounds(s, cov, t)
    out = {"value": value, "corrected": None if math.isnan(shrink) else value * shrink, "upper95": 100 * hi,
           "lower95": 100 * lo,
           "equal_shifts_p_value": None if math.isnan(p) else p,  # NaN: fewer tasks than agents
           "method": "corrected: the value shrunk by max(0, 1 − r/T²) (positive-part James-Stein, Hotelling's T²); "
                     "upper95: max over agent pairs of |shift difference| + t(0.95)·se; lower95: the same less "
                     "a Bonferroni t quantile (both one-sided 95% bounds on the true index); "
                     "equal_shifts_p_value: Hotelling's T² over tasks"}
    if margin is not None:
        out["verdict"] = verdict(out, margin)
    return out


def verdict(block: dict, margin: float) -> str:
    """'within' (upper95 ≤ margin), 'beyond' (lower95 > margin) or 'inconclusive'."""
    if block.get("upper95") is None:
        return "inconclusive"
    if block["upper95"] <= margin:
        return "within"
    if block["lower95"] > margin:
        return "beyond"
    return "inconclusive"
