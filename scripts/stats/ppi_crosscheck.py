"""Cross-check of our PPI++ mean interval (analysis/ppi.py) against the method's authors' `ppi_py.ppi_mean_ci`.

ppi-python is not a dependency of this project (numba, pandas, statsmodels, scikit-learn): install it
in a throwaway environment that also sees this project, then run this script there:

    python -m venv --system-site-packages /tmp/ppivenv && /tmp/ppivenv/bin/pip install ppi-python==0.2.3
    PYTHONPATH=$PWD /tmp/ppivenv/bin/python scripts/stats/ppi_crosscheck.py

Data: 200 sets of task scores (shares of 10 rubrics, difficulty ~ Beta(2, 2)), n = 5–79 labelled and
N = 5–399 unlabelled tasks, judges good, biased, useless and anti-correlated in turn (so λ is inside
(0, 1), near 0 and clipped at 0). Prints the largest difference between the two intervals' ends.
"""

from __future__ import annotations

import numpy as np
import ppi_py

from lifesearch_local.analysis.ppi import ppi_mean_ci


def judge_scores(rng: np.random.Generator, kind: int, y: np.ndarray, p: np.ndarray) -> np.ndarray:
    if kind == 0:  # good: the human score plus a little noise
        return np.clip(y + rng.normal(0, 0.05, len(y)), 0, 1)
    if kind == 1:  # biased: misses 30% of what is there
        return rng.binomial(10, p * 0.7) / 10
    if kind == 2:  # useless: unrelated to the task
        return rng.binomial(10, 0.5, len(y)) / 10
    return 1 - y  # anti-correlated: λ clipped at 0


def main() -> None:
    rng = np.random.default_rng(7)
    worst, lams = 0.0, []
    for case in range(200):
        n, big_n = int(rng.integers(5, 80)), int(rng.integers(5, 400))
        p = rng.beta(2, 2, n + big_n)
        y = rng.binomial(10, p) / 10
        f = judge_scores(rng, case % 4, y, p)
        ours = ppi_mean_ci(y[:n], f[:n], f[n:], min_labelled=2)  # intervals on few tasks too, as ppi_py
        lo, hi = ppi_py.ppi_mean_ci(y[:n], f[:n], f[n:], alpha=0.05)
        theirs = np.array([np.ravel(lo)[0], np.ravel(hi)[0]])
        worst = max(worst, float(np.max(np.abs(np.asarray(ours.ci95) - theirs))))
        lams.append(ours.lam)
    from importlib.metadata import version

    print(f"ppi-python {version('ppi-python')} vs ours on 200 sets: max |difference| of the interval ends = {worst:.2e}; "
          f"λ from {min(lams):.3f} to {max(lams):.3f}")


if __name__ == "__main__":
    main()
