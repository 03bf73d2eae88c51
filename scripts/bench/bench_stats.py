"""Benchmark (not a timed test): score CIs and all paired comparisons for 203 tasks × 10 agents × 10,000 resamples.

    OMP_NUM_THREADS=1 python scripts/bench/bench_stats.py [--tasks 203] [--agents 10] [--resamples 10000] [--repeats 5]

Prints min / median / max wall seconds of `stats.score_uncertainty` (overall CIs, per-domain CIs,
45 paired bootstrap CIs and sign-flip tests, Holm) on synthetic scores, with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from lifesearch_local.analysis import resampling as stats

DOMAINS = ("company", "academic", "financial", "policy", "industry", "technical", "everyday")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=203)
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--resamples", type=int, default=stats.DEFAULT_RESAMPLES)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    tids = [f"t{i}" for i in range(args.tasks)]
    scores = {f"agent{a}": dict(zip(tids, rng.beta(2, 2, args.tasks).tolist(), strict=True)) for a in range(args.agents)}
    judged = {a: set(tids) for a in scores}
    domains = {t: DOMAINS[i % len(DOMAINS)] for i, t in enumerate(tids)}
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        u = stats.score_uncertainty(scores, judged, domains, n_resamples=args.resamples)
        times.append(time.perf_counter() - t0)
    print(f"{args.tasks} tasks × {args.agents} agents × {args.resamples} resamples "
          f"({len(u.comparisons)} pairs, {len(set(domains.values()))} domains): "
          f"min {min(times):.3f} s, median {statistics.median(times):.3f} s, max {max(times):.3f} s "
          f"over {args.repeats} repeats; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; "
          f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
