"""AUROC with clustered decisions: Obuchowski's (1997) normal interval, for when the report bootstrap is too large.

A report's decisions share the report, so the usual DeLong variance (independent decisions) is too
small. Obuchowski ("Nonparametric analysis of clustered ROC curve data", Biometrics 53, 1997) sums
the DeLong placement values per cluster (here: per report) and takes their between-cluster variance.
With M positive and N negative decisions (p_true, label), V10_i = share of negatives below positive i
(ties ½), V01_j = share of positives above negative j, A = mean V10 = mean V01; per report k,
S10_k = Σ V10 over its positives (m_k of them), S01_k = Σ V01 over its negatives (n_k); over the K
reports with a decision,

    s10 = K/((K−1)·M)·Σ (S10_k − m_k·A)²,  s01 = K/((K−1)·N)·Σ (S01_k − n_k·A)²,
    s11 = K/(K−1)·Σ (S10_k − m_k·A)(S01_k − n_k·A),   var(A) = s10/M + s01/N + 2·s11/(M·N),

and the interval is A ± t_{K−1}·√var (the t quantile for K reports: the normal one undercovers a
little with few reports), clipped to [0, 1]. O(n log n): it serves where the report × report
bootstrap matrix would not fit. Checked by simulation in tests/analysis/test_clustered_auc.py.
"""

from __future__ import annotations

import math

import numpy as np

METHOD = "Obuchowski (1997) clustered interval over reports (t quantile)"


def clustered_auc(p: np.ndarray, label: np.ndarray, report: np.ndarray, level: float = 0.95) -> tuple[float, list[float] | None]:
    """(AUROC, its interval or None) from decisions' p_true, labels and report indices (0..K−1)."""
    from scipy.stats import t as t_dist

    p, lab, k = np.asarray(p, float), np.asarray(label, bool), np.asarray(report, np.int64)
    pp, pn = p[lab], p[~lab]
    m, n = len(pp), len(pn)
    if not m or not n:
        return math.nan, None
    sn, sp = np.sort(pn), np.sort(pp)
    below = np.searchsorted(sn, pp, "left")
    v10 = (below + 0.5 * (np.searchsorted(sn, pp, "right") - below)) / n
    at_or_below = np.searchsorted(sp, pn, "right")
    v01 = (m - at_or_below + 0.5 * (at_or_below - np.searchsorted(sp, pn, "left"))) / m
    a = float(v10.mean())
    size = int(k.max()) + 1
    s10 = np.bincount(k[lab], weights=v10, minlength=size)
    s01 = np.bincount(k[~lab], weights=v01, minlength=size)
    mk = np.bincount(k[lab], minlength=size)
    nk = np.bincount(k[~lab], minlength=size)
    used = (mk + nk) > 0
    big_k = int(used.sum())
    if big_k < 2:
        return a, None
    r10, r01 = (s10 - mk * a)[used], (s01 - nk * a)[used]
    f = big_k / (big_k - 1)
    var = f * (r10 @ r10) / m**2 + f * (r01 @ r01) / n**2 + 2 * f * (r10 @ r01) / (m * n)
    if not var > 0:
        return a, None
    half = float(t_dist.ppf(0.5 + level / 2, big_k - 1)) * math.sqrt(var)
    return a, [max(0.0, a - half), min(1.0, a + half)]
