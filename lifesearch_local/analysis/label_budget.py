"""How many human labels a decision needs: labelled reports for a non-inferiority margin, labelled tasks for a PPI half-width.

Non-inferiority of judge X against reference R (certify): d = accuracy(X) − accuracy(R) on labelled
decisions, a one-sided test at level α of "d ≤ −M" with power 1 − β when the true d is `assumed_diff`
(0 by default: the planner asks how many labels show that an equally good judge is not worse by M).
Per decision, c = [X right] − [R right] has variance π − d² (π the discordance: the share of
decisions where exactly one judge is right); a report's m decisions share the report, so the mean of c
over n decisions of k reports has variance (π − d²)·DE/n with the design effect DE = 1 + (m − 1)·ρ (ρ
the intra-report correlation of c). The normal approximation gives

    n = (z_{1−α} + z_{1−β})² · (π − d²) · DE / (M + d)²  decisions,   k = n / m reports.

From a pilot (the labelled decisions certify has) the same with the pilot's own cluster variance of d:
k = k₀ · v̂ · (z_{1−α} + z_{1−β})² / (M + d)², v̂ the variance of d̂ over its k₀ reports.

PPI++ (score --ppi) with n labelled tasks among many: the interval's half-width is about
z·σ·√((1 − ρ²)/n + ρ²/N) (σ the sd of a task's human score, ρ the judge–truth correlation of task
scores, N the unlabelled tasks, optimal λ), so n = z²·σ²·(1 − ρ²) / (h² − z²·σ²·ρ²/N).
Checked by simulation in tests/analysis/test_label_budget.py.
"""

from __future__ import annotations

import math

import numpy as np

ALPHA_ONE_SIDED = 0.025
"""Default one-sided level of non-inferiority: the regulatory convention (ICH E9), the same as asking the
lower end of a two-sided 95% interval to clear −M."""
POWER = 0.80


def _z(p: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(p))


def design_effect(rubrics_per_report: float, icc: float) -> float:
    """1 + (m − 1)·ρ: how much a report's shared reading inflates the variance of a mean over decisions."""
    return 1.0 + (rubrics_per_report - 1.0) * icc


def discordance_if_independent(acc_judge: float, acc_reference: float) -> float:
    """Share of decisions where exactly one judge is right when their errors are independent."""
    return acc_judge * (1 - acc_reference) + acc_reference * (1 - acc_judge)


def plan_non_inferiority(acc_judge: float, acc_reference: float, *, margin: float, rubrics_per_report: float,
                         icc: float, discordance: float | None = None, alpha: float = ALPHA_ONE_SIDED,
                         power: float = POWER) -> dict:
    """Labelled decisions and reports a non-inferiority study needs (accuracies as shares, margin in points),
    before any label exists. The true difference is taken to be acc_judge − acc_reference."""
    d = acc_judge - acc_reference
    pi = discordance_if_independent(acc_judge, acc_reference) if discordance is None else discordance
    if not 0 <= pi <= 1 or pi < abs(d):
        raise ValueError(f"discordance {pi:g} impossible with accuracies {acc_judge:g} and {acc_reference:g} "
                         "(it is at least their difference)")
    de = design_effect(rubrics_per_report, icc)
    m = margin / 100 + d
    out = {"assumed_diff": 100 * d, "discordance": pi, "design_effect": de, "margin": margin, "alpha_one_sided": alpha,
           "power": power, "rubrics_per_report": rubrics_per_report, "icc": icc}
    if m <= 0:
        return {**out, "decisions_needed": None, "reports_needed": None,
                "reason": "the judge is worse than the reference by the margin or more: no sample size shows it is not"}
    n = (_z(1 - alpha) + _z(power)) ** 2 * (pi - d * d) * de / (m * m)
    return {**out, "decisions_needed": math.ceil(n), "reports_needed": math.ceil(n / rubrics_per_report)}


def reports_needed(per_report_diff: np.ndarray, per_report_n: np.ndarray, margin: float, *,
                   alpha: float = ALPHA_ONE_SIDED, power: float = POWER, assumed_diff: float = 0.0) -> dict:
    """From a pilot: labelled reports needed for `margin` (points) at `power`, with the pilot's own discordance
    and design effect. `per_report_diff[k]` = Σ over report k's decisions of ([X right] − [R right]) (runs
    averaged), `per_report_n[k]` its decisions; the true difference is taken as `assumed_diff` (points)."""
    dk, nk = np.asarray(per_report_diff, float), np.asarray(per_report_n, float)
    k0, n = len(dk), float(nk.sum())
    if k0 < 2 or n == 0:
        return {"reports_needed": None, "reason": "fewer than 2 labelled reports: no pilot variance"}
    d_hat = float(dk.sum() / n)
    v = float(np.sum((dk - d_hat * nk) ** 2) / n**2 * k0 / (k0 - 1))  # cluster (ratio) variance of d̂
    m = margin / 100 + assumed_diff / 100
    out = {"assumed_diff": assumed_diff, "alpha_one_sided": alpha, "power": power, "margin": margin,
           "pilot_reports": k0, "pilot_decisions": int(n)}
    if v <= 0:
        return {**out, "reports_needed": None,
                "reason": "no report-to-report spread in the pilot's differences: no variance to plan from"}
    per_decision = float(np.sum(dk * dk / np.maximum(nk, 1)) / n)  # ≈ mean c² (exact for one decision a report)
    var_c = max(per_decision - d_hat * d_hat, 1e-12)
    out["design_effect"] = v * n / var_c
    if m <= 0:
        return {**out, "reports_needed": None, "reason": "an assumed difference at or below −margin cannot be shown non-inferior"}
    return {**out, "reports_needed": math.ceil(k0 * v * (_z(1 - alpha) + _z(power)) ** 2 / (m * m))}


def plan_ppi(sigma: float, rho: float, half_width: float, *, level: float = 0.95,
             n_unlabelled: int | None = None) -> dict:
    """Labelled tasks PPI++ needs for a `half_width` (same unit as `sigma`, the sd of a task's human score)
    when the judge's task scores correlate `rho` with the human ones; `n_unlabelled` None = many."""
    if not 0 <= abs(rho) <= 1 or sigma < 0 or half_width <= 0:
        raise ValueError("need sigma ≥ 0, |rho| ≤ 1 and half_width > 0")
    z = _z(0.5 + level / 2)
    floor = 0.0 if not n_unlabelled else z * z * sigma * sigma * rho * rho / n_unlabelled
    out = {"sigma": sigma, "rho": rho, "half_width": half_width, "level": level, "n_unlabelled": n_unlabelled,
           "labels_only_tasks": math.ceil(z * z * sigma * sigma / half_width**2)}
    if half_width**2 <= floor:
        return {**out, "labelled_tasks_needed": None,
                "reason": "the unlabelled tasks alone leave more than this half-width: label more tasks of another set"}
    return {**out, "labelled_tasks_needed": max(2, math.ceil(z * z * sigma * sigma * (1 - rho * rho)
                                                             / (half_width**2 - floor)))}
