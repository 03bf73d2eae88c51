"""One timing harness for every judge engine: warm-up, N repeats, min/median/max, the load average.

`bench judge` times each engine (packed hf kernel, one prompt per rubric, vLLM prefix caching) by
running what `lifesearch judge` runs: `judge_batches` over the same pending reports, in its
batches, on the engine object the judge would open. Each repeat starts from a cold prefix cache
(`reset`), as a judge run on a fresh engine does.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.rubric import Pending, judge_batches
from serving import Engine


@dataclass
class Timing:
    """Seconds of each timed repeat of one column, and what the last repeat answered."""

    seconds: list[float] = field(default_factory=list)
    """Wall seconds per repeat (warm-up excluded)."""
    p_true: list[float] = field(default_factory=list)
    """p_true per decision from the last repeat, in input order."""

    def summary(self) -> dict[str, float]:
        """min / median / max of the repeats' seconds."""
        return spread(self.seconds)


def spread(seconds: Sequence[float]) -> dict[str, float]:
    """min, median and max of `seconds` (rounded to 0.1 ms)."""
    return {"min": round(min(seconds), 4), "median": round(statistics.median(seconds), 4),
            "max": round(max(seconds), 4)}


def load_average() -> list[float]:
    """1, 5 and 15-minute load averages (the machine may be shared: figures mean little without them)."""
    return [round(x, 2) for x in os.getloadavg()]


def judge_p_true(engine: Engine, cfg: JudgeConfig, work: Sequence[Pending]) -> list[float]:
    """p_true of every pending rubric, computed exactly as `lifesearch judge` computes it (its batches)."""
    return [j.p_true for _, rows in judge_batches(engine, cfg, work) for row in rows for j in row]


def repeat(run: Callable[[], list[float]], repeats: int, *, warm_up: Callable[[], object] | None = None,
           reset: Callable[[], object] | None = None) -> Timing:
    """`warm_up` once, then `repeats` timed calls of `run`, each after `reset` (e.g. emptying a prefix cache)."""
    if warm_up is not None:
        warm_up()
    out = Timing()
    for _ in range(repeats):
        if reset is not None:
            reset()
        t0 = time.perf_counter()
        out.p_true = run()
        out.seconds.append(time.perf_counter() - t0)
    return out
