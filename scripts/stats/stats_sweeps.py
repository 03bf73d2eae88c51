"""Slower simulation sweeps of certify's statistics (the fast checks are in tests/analysis/); results go in docs/statistics.md.

    PYTHONPATH=$PWD python scripts/stats/stats_sweeps.py [--reps 500] [--only bias|judges|ni]

- bias: the Bias Index at a true index of 0 and 20 over tasks × agents (rubrics 10 a task, both judges flip
  15% of the truth): mean of the raw and the corrected index, coverage of upper95 and lower95, rejection
  rate of the equal-shifts test at 0.05, share passing a 2-point margin (upper95 ≤ 2), and at a true 0 the
  bootstrap bias correction 2θ̂ − mean θ* and the old percentile interval's coverage, for comparison;
- judges: false-positive rate at 0.05 of the report-level test and of McNemar's under report-level skill
  (error logit = logit 0.15 + 1.2·z per report and judge, equal accuracy), by reports × rubrics;
- ni: non-inferiority's rate of "non-inferior" at a true difference of −M (its one-sided level) and at 0
  with the reports the planner asks for (its power), for a few margins.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lifesearch_local.analysis import resampling as stats  # noqa: E402
from lifesearch_local.analysis.agreement_ci import Clustered, paired_test  # noqa: E402
from lifesearch_local.analysis.bias_index import bias_index  # noqa: E402
from lifesearch_local.analysis.certify import non_inferiority_sums  # noqa: E402
from lifesearch_local.analysis.label_budget import discordance_if_independent, plan_non_inferiority  # noqa: E402

BIAS_20 = 0.2 / 0.43


def simulate(rng, tasks, agents, rubrics=10, bias=0.0):
    q = rng.beta(3, 2, size=(tasks, 1, 1))
    y = rng.random((tasks, agents, rubrics)) < q
    x = y ^ (rng.random(y.shape) < 0.15)
    r = y ^ (rng.random(y.shape) < 0.15)
    if bias:
        x[:, 0] |= rng.random((tasks, rubrics)) < bias
    return x.mean(-1), r.mean(-1)


def boot_range(x, r, seed, b=400):
    counts = stats.resample_counts(len(x), b, stats.rng_for(seed, 1))
    d = 100 * (counts @ (x - r)) / len(x)
    rng_ = d.max(axis=1) - d.min(axis=1)
    return rng_, stats.percentile_ci(rng_, n_units=len(x))[0]


def sweep_bias(reps: int) -> None:
    print("| tasks | agents | true | raw mean | corrected mean | bootstrap-corrected mean | upper95 covers | "
          "lower95 covers | equal-shifts rejects | passes 2-pt margin | old interval covers |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for tasks, agents in ((40, 4), (203, 6), (812, 6)):
        for true, bias in ((0.0, 0.0), (20.0, BIAS_20)):
            rng = np.random.default_rng(tasks * 10 + agents + int(true))
            rows = []
            for i in range(reps):
                x, r = simulate(rng, tasks, agents, bias=bias)
                bi = bias_index(x, r, margin=2.0)
                extra = (np.nan, np.nan)
                if i < min(reps, 200):  # the bootstrap comparisons are slower: fewer replications
                    boots, old = boot_range(x, r, i)
                    extra = (2 * bi["value"] - boots.mean(), float(old[0] <= true <= old[1]))
                rows.append((bi["value"], bi["corrected"], bi["upper95"] >= true, bi["lower95"] <= true,
                             bi["equal_shifts_p_value"] < 0.05, bi["upper95"] <= 2.0, *extra))
            a = np.array(rows, dtype=float)
            m = np.nanmean(a, axis=0)
            print(f"| {tasks} | {agents} | {true:g} | {m[0]:.2f} | {m[1]:.2f} | {m[6]:.2f} | {m[2]:.1%} | {m[3]:.1%} | "
                  f"{m[4]:.1%} | {m[5]:.1%} | {m[7]:.1%} |")


def sweep_judges(reps: int) -> None:
    print("| reports | rubrics | report-level test rejects | McNemar rejects |")
    print("|---|---|---|---|")
    for reports, rubrics in ((20, 10), (40, 10), (160, 10), (40, 40)):
        rng = np.random.default_rng(reports + rubrics)
        ours, mcn = [], []
        for i in range(reps):
            logit = np.log(0.15 / 0.85) + 1.2 * rng.standard_normal((2, reports, 1))
            right = rng.random((2, reports, rubrics)) >= 1 / (1 + np.exp(-logit))
            ca, cb = (Clustered(reports, 1, np.c_[np.full(reports, rubrics), r.sum(axis=1)], None, None, None)
                      for r in right)
            ours.append(paired_test(ca, cb, {"diff": 0.0, "ci95": None}, n_resamples=1000, seed=i)["p_value"] < 0.05)
            b, c = int((right[0] & ~right[1]).sum()), int((~right[0] & right[1]).sum())
            mcn.append(stats.mcnemar_exact(b, c) < 0.05)
        print(f"| {reports} | {rubrics} | {np.mean(ours):.1%} | {np.mean(mcn):.1%} |")


def sweep_ni(reps: int) -> None:
    a, b_ = 17.0, 3.0
    icc = 2 * a * b_ / ((a + b_) ** 2 * (a + b_ + 1)) / discordance_if_independent(0.85, 0.85)
    print("| margin (points) | planned reports (80% power) | non-inferior at true −margin (level 2.5%) | "
          "non-inferior at true 0 (power) |")
    print("|---|---|---|---|")
    for margin in (2.0, 5.0, 10.0):
        k = plan_non_inferiority(0.85, 0.85, margin=margin, rubrics_per_report=10, icc=icc)["reports_needed"]
        rates = []
        for shift in (margin / 100, 0.0):
            rng = np.random.default_rng(int(margin * 10 + shift * 1000))
            hits = 0
            for i in range(reps):
                ax, ar = rng.beta(a, b_, k) - shift, rng.beta(a, b_, k)
                sums = np.c_[np.full(k, 10), rng.binomial(10, np.clip(ax, 0, 1)), rng.binomial(10, ar)].astype(float)
                hits += non_inferiority_sums(sums, margin, n_resamples=1000, seed=i)["verdict"] == "non-inferior"
            rates.append(hits / reps)
        print(f"| {margin:g} | {k} | {rates[0]:.1%} | {rates[1]:.1%} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--only", choices=("bias", "judges", "ni"))
    args = ap.parse_args()
    print(f"{args.reps} replications a cell; load average {os.getloadavg()}")
    for name, fn in (("bias", sweep_bias), ("judges", sweep_judges), ("ni", sweep_ni)):
        if args.only in (None, name):
            t0 = time.perf_counter()
            fn(args.reps)
            print(f"({name}: {time.perf_counter() - t0:.0f} s)\n")


if __name__ == "__main__":
    main()
