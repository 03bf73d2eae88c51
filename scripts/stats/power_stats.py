"""Power of `score`'s paired comparison by simulation: how many tasks detect a 2, 5 or 10 point difference.

    OMP_NUM_THREADS=1 python scripts/stats/power_stats.py [--sims 400] [--flips 1000]

Model (one task): difficulty q ~ Beta(3, 2) (task scores spread with sd ≈ 0.2, as a 0–100
benchmark whose agents score 40–80 does); each agent's probability of satisfying a rubric is
q + its task-specific deviation u ~ N(0, τ) (agents are good at different tasks), agent A's
shifted by δ, clipped to [0, 1]; the task has 20 equally weighted rubrics, each satisfied or
not (Bernoulli). A set of n such tasks is tested with the paired sign-flip test of
`lifesearch score` (stats.sign_flip_p) at 0.05; power = the share of sets where p < 0.05.
Prints a markdown table: per δ and τ, the power at each n and the smallest n with power ≥ 0.8.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from lifesearch_local.analysis import resampling as stats

NS = (25, 50, 100, 203, 400, 800, 1600)
DELTAS = (0.02, 0.05, 0.10)
TAUS = (0.05, 0.15)
RUBRICS = 20


def paired_diffs(rng: np.random.Generator, sims: int, n: int, delta: float, tau: float) -> tuple[np.ndarray, float]:
    """sims × n paired task-score differences (A − B), and the paired sd they have."""
    q = rng.beta(3.0, 2.0, size=(sims, n))
    pa = np.clip(q + delta + rng.normal(0, tau, size=q.shape), 0, 1)
    pb = np.clip(q + rng.normal(0, tau, size=q.shape), 0, 1)
    d = (rng.binomial(RUBRICS, pa) - rng.binomial(RUBRICS, pb)) / RUBRICS
    return d, float(d.std(ddof=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=400)
    ap.add_argument("--flips", type=int, default=1000)
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"| δ (points) | τ | paired sd | {' | '.join(f'n={n}' for n in NS)} | tasks for 80% power |")
    print("|---|---|---|" + "---|" * len(NS) + "---|")
    for delta in DELTAS:
        for tau in TAUS:
            rng = np.random.default_rng(stats.DEFAULT_SEED)
            powers, sds = [], []
            for n in NS:
                d, sd = paired_diffs(rng, args.sims, n, delta, tau)
                p = np.array([stats.sign_flip_p(d[i], args.flips, seed=i)[0] for i in range(args.sims)])
                powers.append(float(np.mean(p < 0.05)))
                sds.append(sd)
            enough = next((f"{n}" for n, pw in zip(NS, powers, strict=True) if pw >= 0.8), f"> {NS[-1]}")
            print(f"| {100 * delta:g} | {tau:g} | {np.mean(sds):.2f} | {' | '.join(f'{pw:.2f}' for pw in powers)} | {enough} |")
    la = os.getloadavg()
    print(f"\n{args.sims} simulated sets per cell, {args.flips} sign flips each, seed {stats.DEFAULT_SEED}; "
          f"{time.perf_counter() - t0:.0f} s; load average {la[0]:.2f} {la[1]:.2f} {la[2]:.2f} (loaded machine)")


if __name__ == "__main__":
    main()
