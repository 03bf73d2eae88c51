"""Prediction-powered scores: an agent's eq.-1 score corrected for the judge with a few human-labelled tasks (PPI++).

The estimator is the mean estimator of PPI++ (Angelopoulos, Duchi & Zrnic 2023, arXiv:2311.01453)
with power tuning, as `ppi_py.ppi_mean_ci` computes it, at the task level: the unit is a task,
its value the agent's eq.-1 score. With n labelled tasks (human score y_i, judge score f_i) and
N unlabelled ones (judge score f~_j),

    θ̂ = λ·mean(f~) + mean(y − λ·f),   se² = λ²·var(f~)/N + var(y − λ·f)/n   (variances with 1/N, 1/n),
    λ = cov(y, f) / ((1 + n/N)·var(f ∪ f~)), clipped to [0, 1],

and the 95% interval is θ̂ ± z_0.975·se. λ = 0 is the labels-only mean; λ = 1 is plain PPI. The
rectifier mean(y − λ·f) removes the judge's bias whatever it is, so the interval is valid for
any judge, provided the labelled tasks are a RANDOM subset of the tasks (chosen before anyone saw
the judge's scores): a subset picked for being easy, or because the judge looked wrong there,
breaks it. A useless judge gets λ ≈ 0 (the labels-only interval); a good one narrows it.
Definitions and the simulation that checks coverage: docs/statistics.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lifesearch_local.analysis.labels import Key
from lifesearch_local.analysis.resampling import LEVEL
from lifesearch_local.analysis.scoring import AgentScore, task_score
from lifesearch_local.records import Task

RANDOM_SUBSET = ("the labelled tasks must be a random subset of the tasks (chosen before seeing any score); "
                 "otherwise the interval is not valid")
MIN_LABELLED = 30
"""No interval below this many labelled tasks: the normal interval (ppi_py's) undercovers on few. Measured
(4,000 simulated sets, a judge that misses 30% of what is there): PPI++ covers 51% at n = 2, 80% at 5,
88% at 10, 92% at 20, 93.5% at 30 (docs/statistics.md). The mean is still given."""


@dataclass
class PPIResult:
    """One prediction-powered mean with its interval."""

    mean: float | None
    ci95: tuple[float, float] | None
    lam: float | None
    """The power-tuning weight λ in [0, 1] (0: labels only)."""
    n_labelled: int
    n_unlabelled: int
    reason: str | None = None
    """Why there is no mean (JSON `reason`) or no interval (JSON `ci95_reason`); None when both are there."""

    def as_json(self) -> dict:
        return {"mean": self.mean, "ci95": None if self.ci95 is None else list(self.ci95),
                "n_labelled_tasks": self.n_labelled, "n_unlabelled_tasks": self.n_unlabelled, "lambda": self.lam,
                **({("reason" if self.mean is None else "ci95_reason"): self.reason} if self.reason else {})}


def _z(level: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(0.5 + level / 2))


def power_tuned_lambda(y: np.ndarray, f: np.ndarray, f_unlabelled: np.ndarray) -> np.ndarray:
    """PPI++'s variance-minimising λ for a mean, clipped to [0, 1], along the last axis (batched).

    0 where the judge's scores do not vary (nothing to gain from them) or nothing is unlabelled."""
    n, big_n = y.shape[-1], f_unlabelled.shape[-1]
    if big_n == 0:
        return np.zeros(y.shape[:-1])
    cov = ((y - y.mean(-1, keepdims=True)) * (f - f.mean(-1, keepdims=True))).mean(-1)
    var = np.var(np.concatenate([f, f_unlabelled], axis=-1), axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = cov / ((1 + n / big_n) * var)
    return np.clip(np.where(var > 0, lam, 0.0), 0.0, 1.0)


def ppi_arrays(y: np.ndarray, f: np.ndarray, f_unlabelled: np.ndarray, *, level: float = LEVEL,
               lam: float | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(θ̂, half-width of the interval, λ) along the last axis: the batched core of `ppi_mean_ci`
    (leading axes are independent sets, e.g. the simulations of the tests). `lam=None` tunes λ."""
    y, f, fu = (np.asarray(a, dtype=np.float64) for a in (y, f, f_unlabelled))
    n, big_n = y.shape[-1], fu.shape[-1]
    lam_arr = power_tuned_lambda(y, f, fu) if lam is None else np.broadcast_to(np.asarray(lam, float), y.shape[:-1])
    lam_b = lam_arr[..., None]
    rect = y - lam_b * f
    imputed = (lam_arr * fu.mean(-1)) if big_n else np.zeros(y.shape[:-1])
    var_imp = (lam_arr**2 * fu.var(-1) / big_n) if big_n else np.zeros(y.shape[:-1])
    se = np.sqrt(var_imp + rect.var(-1) / n)
    return imputed + rect.mean(-1), _z(level) * se, lam_arr


def finite_population_arrays(y: np.ndarray, f: np.ndarray, f_unlabelled: np.ndarray, *, level: float = LEVEL,
                             lam: float | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(θ̂, half-width, λ) along the last axis for the mean over THESE n + N tasks (labelled ones a simple random
    sample of them): the difference estimator θ̂ = λ·mean(f over all tasks) + mean(y − λ·f), whose variance is
    (1 − n/(n + N))·S²(y − λ·f)/n (sampling without replacement; the judge's mean over all tasks is known
    exactly, so it adds none). λ = cov(y, f)/var(f) on the labelled tasks, clipped to [0, 1]."""
    y, f, fu = (np.asarray(a, dtype=np.float64) for a in (y, f, f_unlabelled))
    n, big_n = y.shape[-1], fu.shape[-1]
    if lam is None:
        fc = f - f.mean(-1, keepdims=True)
        var = (fc * fc).mean(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam_arr = np.clip(np.where(var > 0, ((y - y.mean(-1, keepdims=True)) * fc).mean(-1) / var, 0.0), 0, 1)
    else:
        lam_arr = np.broadcast_to(np.asarray(lam, float), y.shape[:-1])
    rect = y - lam_arr[..., None] * f
    f_all = np.concatenate([f, fu], axis=-1).mean(-1)
    s2 = rect.var(-1, ddof=1) if n > 1 else np.full(y.shape[:-1], np.nan)
    se = np.sqrt((1 - n / (n + big_n)) * s2 / n)
    return lam_arr * f_all + rect.mean(-1), _z(level) * se, lam_arr


ESTIMANDS = {
    "superpopulation": "superpopulation: the mean score over the population of tasks these tasks are a sample of (labelled tasks a "
                       "random subset); for the benchmark's own tasks this interval is conservative",
    "these tasks": "these tasks: the mean score over exactly these tasks (labelled tasks a simple random sample of them; "
                   "finite-population correction)",
}


def ppi_mean_ci(y: Sequence[float], yhat: Sequence[float], yhat_unlabelled: Sequence[float], *,
                level: float = LEVEL, lam: float | None = None, min_labelled: int = MIN_LABELLED,
                finite_population: bool = False) -> PPIResult:
    """The PPI++ mean and its interval from labelled values `y`, the predictions on them `yhat` and the
    predictions on the unlabelled units `yhat_unlabelled` (disjoint from the labelled ones), as
    `ppi_py.ppi_mean_ci(Y, Yhat, Yhat_unlabeled, alpha=1 - level)` computes them. Here the units are tasks:
    y = the human-label score of a labelled task, yhat = the judge's score of it, yhat_unlabelled = the
    judge's score of every other task. No interval below `min_labelled` labelled tasks (at least 2) or with
    zero spread. `finite_population`: the mean over these tasks (finite_population_arrays), not PPI++'s
    superpopulation mean."""
    ya, fa, fu = (np.asarray(a, dtype=np.float64) for a in (y, yhat, yhat_unlabelled))
    if len(ya) != len(fa):
        raise ValueError(f"{len(ya)} labelled values but {len(fa)} predictions on them")
    n, big_n = len(ya), len(fu)
    if n == 0:
        return PPIResult(None, None, None, 0, big_n, "no labelled task: nothing to correct the judge with")
    core = finite_population_arrays if finite_population else ppi_arrays
    mean, half, lam_arr = core(ya, fa, fu, level=level, lam=lam)
    m, h, lam_v = float(mean), float(half), float(lam_arr)
    if n < max(2, min_labelled):
        return PPIResult(m, None, lam_v, n, big_n, f"n={n} labelled task{'s' if n > 1 else ''}: no interval "
                         f"(a normal interval needs {max(2, min_labelled)}; on fewer it undercovers)")
    if not math.isfinite(h) or h <= 0:
        return PPIResult(m, None, lam_v, n, big_n, "no spread in the labelled tasks' scores: no interval")
    return PPIResult(m, (m - h, m + h), lam_v, n, big_n)


# -- task-level inputs from judgments and labels -----------------------------------------------
def labelled_task_scores(tasks: Sequence[Task], agent: str, runs: Sequence[int],
                         labels: Mapping[Key, bool]) -> tuple[dict[str, float], list[str]]:
    """task → the agent's eq.-1 score under the labels (mean over `runs`), for the tasks whose every
    positive-weight rubric is labelled in every run; and the tasks labelled only in part (left out)."""
    full: dict[str, float] = {}
    partial: list[str] = []
    for t in tasks:
        keys = [(t.id, agent, r, rb.id) for r in runs for rb in t.rubrics if rb.weight > 0]
        have = sum(k in labels for k in keys)
        if have == len(keys) and keys:
            full[t.id] = sum(task_score(t.rubrics, {k[3]: labels[k] for k in keys if k[2] == r}) for r in runs) / len(runs)
        elif have:
            partial.append(t.id)
    return full, partial


def agent_ppi(tasks: Sequence[Task], row: AgentScore, labels: Mapping[Key, bool], *, level: float = LEVEL,
              finite_population: bool = False) -> dict:
    """One agent's prediction-powered score: the judge's eq.-1 task scores (`row.tasks`) on every task,
    corrected with the tasks the labels cover fully. JSON: {mean, ci95, n_labelled_tasks, …, estimand,
    labels_only and its interval (the same estimator with λ = 0, so the widths compare)}."""
    human, partial = labelled_task_scores(tasks, row.agent, sorted(row.runs), labels)
    lab = [t for t in row.tasks if t in human]
    unl = [t for t in row.tasks if t not in human]
    args = ([human[t] for t in lab], [row.tasks[t] for t in lab], [row.tasks[t] for t in unl])
    res = ppi_mean_ci(*args, level=level, finite_population=finite_population)
    out = res.as_json()
    out["estimand"] = ESTIMANDS["these tasks" if finite_population else "superpopulation"]
    out["level"] = level
    out["judge_only"] = float(np.mean([row.tasks[t] for t in row.tasks])) if row.tasks else None
    only = ppi_mean_ci(*args, level=level, lam=0.0, finite_population=finite_population)
    out["labels_only"] = only.mean
    out["labels_only_ci95"] = None if only.ci95 is None else list(only.ci95)
    if partial:
        out["partly_labelled_tasks"] = len(partial)
    return out


def ppi_by_judge(tasks: Sequence[Task], by_judge: Mapping[str, Mapping[str, AgentScore]],
                 labels: Mapping[Key, bool], *, finite_population: bool = False) -> dict[str, dict[str, dict]]:
    """judge name → agent → agent_ppi (the human labels `labels` correct every judge's scores)."""
    return {name: {a: agent_ppi(tasks, row, labels, finite_population=finite_population) for a, row in rows.items()}
            for name, rows in by_judge.items()}
