"""A candidate and a reference judge with a known Bias Index, for the simulation tests of shifts and the Bias Index."""

from __future__ import annotations

import numpy as np

FLIP = 0.15
BIAS_20 = 0.2 / 0.43  # X also says "true" for agent 0 with this chance: + 0.43·this = 20 points exactly


def simulate(rng: np.random.Generator, tasks: int = 40, agents: int = 4, rubrics: int = 10,
             bias: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Task × agent scores under a candidate X and a reference R that both flip 15% of the true verdicts,
    independently; with `bias`, X also turns a "false" of agent 0 into "true" with that chance. Task
    difficulty ~ Beta(3, 2) (mean 0.6), so P(X says false) = 1 − (0.15 + 0.7·0.6) = 0.43."""
    q = rng.beta(3, 2, size=(tasks, 1, 1))
    y = rng.random((tasks, agents, rubrics)) < q
    x = y ^ (rng.random(y.shape) < FLIP)
    r = y ^ (rng.random(y.shape) < FLIP)
    if bias:
        x[:, 0] |= rng.random((tasks, rubrics)) < bias
    return x.mean(-1), r.mean(-1)
