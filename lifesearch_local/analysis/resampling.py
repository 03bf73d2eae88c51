"""Resampling statistics for scores: task bootstrap CIs, paired comparisons, sign-flip tests (pure numpy).

Every function here is pure: same arrays and seed in, same numbers out, byte for byte.
Definitions and the reasons behind them are in docs/statistics.md. In short:
- a *resample* draws n units (tasks, or reports for agreement) with replacement; it is held
  as a count matrix C (B × n, C[b, i] = times unit i was drawn), so a statistic that is a
  sum over units is one matrix product C @ values for all B resamples at once;
- the 95% interval is the percentile interval, expanded for small samples (Hesterberg 2015):
  the α'/2 and 1 − α'/2 quantiles of the B resampled statistics (numpy's linear
  interpolation), α' = 2·Φ(−√(n/(n−1))·t_{n−1}(0.975)) for n resampled units (0.05 as n grows);
- the sign-flip p-value of a paired mean difference d̄ over n tasks is the share of sign
  vectors s (all 2^n when 2^n ≤ B, else B random ones plus the observed, the usual +1
  correction) with |mean(s·d)| ≥ |d̄|;
- below 2 resampled units, or where every resample gives the same value, there is no interval:
  a zero-width one would read as certainty. The interval is NaN and `no_interval` says why.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 20260101
"""The seed every bootstrap and permutation uses unless told otherwise (recorded in the output)."""
LEVEL = 0.95
ALPHA = 0.05
METHOD = "expanded percentile (Hesterberg 2015)"
_TIE = 1e-12  # |T*| ≥ |T| up to rounding: a sign flip that reorders a float sum must still count as a tie


def rng_for(seed: int, *stream: int) -> np.random.Generator:
    """An independent generator per (seed, stream…)."""
    return np.random.default_rng(np.random.SeedSequence([seed, *stream]))


def name_stream(*names: str) -> int:
    """A stream number from names (a domain, a set of task ids): adding a domain or an agent pair
    with other tasks never shifts the draws of another."""
    return zlib.crc32("\x1f".join(names).encode("utf-8"))


CHUNK_CELLS = 4_000_000
"""Resamples × units cells built at once: memory stays near reports × resamples for the result, not a multiple."""


def resample_counts(n: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """B × n matrix of how often each of n units is drawn in each of B resamples of size n (built in
    chunks of resamples, drawn in one stream: the same matrix whatever the chunk size)."""
    out = np.empty((n_resamples, n), dtype=np.float64)
    for s, b in _chunks(n, n_resamples):
        out[s:s + b] = _counts(n, b, rng)
    return out


def _chunks(n: int, n_resamples: int) -> list[tuple[int, int]]:
    step = max(1, CHUNK_CELLS // max(n, 1))
    return [(s, min(step, n_resamples - s)) for s in range(0, n_resamples, step)]


def count_chunks(n: int, n_resamples: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """The rows of resample_counts(n, B, rng), yielded a chunk of resamples at a time (bounded memory)."""
    for _, b in _chunks(n, n_resamples):
        yield _counts(n, b, rng)


def _counts(n: int, b: int, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, n, size=(b, n))
    flat = (idx + (np.arange(b) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)


def resampled_sums(sums: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """B × columns: each resample's column sums of the n × columns per-unit table `sums` (units drawn with
    replacement), equal to resample_counts(n, B, rng) @ sums but never holding the B × n count matrix."""
    v = np.asarray(sums, dtype=np.float64)
    v = v.reshape(len(v), -1)
    out = np.empty((n_resamples, v.shape[1]))
    for s, b in _chunks(len(v), n_resamples):
        out[s:s + b] = _counts(len(v), b, rng) @ v
    return out


def expanded_alpha(n_units: int | None, level: float = LEVEL) -> float:
    """The tail probability the percentile interval uses: 1 − level, expanded for n resampled units
    (Hesterberg 2015) to 2·Φ(−√(n/(n−1))·t_{n−1}(1 − α/2)), which widens the interval by the
    small-sample factors a plain percentile interval misses (the n − 1 of the sample variance and
    the t quantile); it tends to 1 − level as n grows (within 1% of it from n ≈ 400)."""
    alpha = 1 - level
    if n_units is None or n_units < 2:
        return alpha
    from scipy.special import ndtr, stdtrit

    return float(2 * ndtr(-math.sqrt(n_units / (n_units - 1)) * stdtrit(n_units - 1, 1 - alpha / 2)))


def percentile_ci(samples: np.ndarray, level: float = LEVEL, n_units: int | None = None) -> np.ndarray:
    """[lo, hi] per column of B × k resampled statistics, expanded for `n_units` resampled units
    (expanded_alpha); NaN resamples (e.g. an undefined κ) are left out."""
    a = np.asarray(samples, dtype=np.float64)
    a = a[:, None] if a.ndim == 1 else a
    tail = expanded_alpha(n_units, level) / 2
    if a.shape[0] and not np.isnan(a).any():  # every column at once: the same numbers, column by column
        return np.quantile(np.ascontiguousarray(a.T), [tail, 1 - tail], axis=1).T.copy()
    out = np.full((a.shape[1], 2), np.nan)
    for j in range(a.shape[1]):
        col = a[:, j][~np.isnan(a[:, j])]
        if len(col):
            out[j] = np.quantile(col, [tail, 1 - tail])
    return out


MIN_UNITS = 2
"""Fewest resampled units an interval needs: one unit resamples to itself."""


def no_interval(ci: Sequence[float] | None, n_units: int) -> str | None:
    """Why `ci` (an interval over `n_units` resampled units) is no interval, or None when it is one:
    below MIN_UNITS units, undefined on every resample, or of zero width (every resample gives the
    same value: no spread). Short, to stand in a table cell in place of the interval."""
    if n_units < MIN_UNITS:
        return f"n={n_units}: no interval"
    if ci is None or any(math.isnan(v) for v in ci):
        return "undefined: no interval"
    if ci[1] - ci[0] <= _TIE * max(1.0, abs(ci[0]), abs(ci[1])):
        return "no spread: no interval"
    return None


def checked(ci: Sequence[float], n_units: int) -> tuple[tuple[float, float], str | None]:
    """(ci, None) for an interval; (NaN, NaN) and the reason for none (see `no_interval`)."""
    why = no_interval(ci, n_units)
    return ((math.nan, math.nan), why) if why else ((float(ci[0]), float(ci[1])), None)


def bootstrap_means(values: np.ndarray, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                    *stream: int) -> np.ndarray:
    """B × k resampled means of the k columns of an n × k matrix, rows (tasks) drawn together."""
    v = np.asarray(values, dtype=np.float64)
    v = v.reshape(len(v), -1)
    return means_from_counts(resample_counts(len(v), n_resamples, rng_for(seed, *(stream or (0,)))), v)


def means_from_counts(counts: np.ndarray, v: np.ndarray) -> np.ndarray:
    """B × k resampled means of the columns of v (n × k) under the B × n count matrix `counts`."""
    # one matrix-vector product per column: a column's numbers never depend on its neighbours
    # (a matrix-matrix product may sum in another order when a column is added)
    # (built k × B and returned transposed: each column contiguous for its quantiles)
    return (np.stack([counts @ v[:, j] for j in range(v.shape[1])], axis=0) / len(v)).T


def mean_ci(values: np.ndarray, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
            *stream: int) -> np.ndarray:
    """95% (expanded) percentile interval of the mean of each column (k × 2)."""
    return percentile_ci(bootstrap_means(values, n_resamples, seed, *stream), n_units=len(values))


def holm(p: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment: p_(i) · (m − i + 1), made monotone, capped at 1 (input order kept)."""
    p = np.asarray(p, dtype=np.float64)
    m = len(p)
    if not m:
        return []
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adj
    return [float(x) for x in out]


def sign_flip_p(diffs: np.ndarray, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                *stream: int) -> np.ndarray:
    """Two-sided sign-flip permutation p-values for the mean of each column of an n × k matrix of
    paired differences (exact over all 2^n sign vectors when 2^n ≤ n_resamples)."""
    d = np.asarray(diffs, dtype=np.float64)
    d = d.reshape(len(d), -1)
    if len(d) == 0:
        return np.ones(d.shape[1])
    n = len(d)
    if 2**n <= n_resamples:
        return flip_p(d, sign_matrix(n, n_resamples, seed, *(stream or (0,))))
    # random signs drawn in chunks of one stream (the same signs as one B × n draw), so memory stays
    # bounded by a chunk, not n_resamples × n
    rng = rng_for(seed, *(stream or (0,)))
    observed = np.abs(d.mean(axis=0))
    extreme = np.zeros(d.shape[1])
    for _, b in _chunks(n, n_resamples):
        signs = rng.integers(0, 2, size=(b, n)) * 2.0 - 1.0
        extreme += (np.abs(signs @ d / n) >= observed - _TIE).sum(axis=0)
    return (1.0 + extreme) / (1.0 + n_resamples)  # the observed signs count as one draw


def sign_matrix(n: int, n_resamples: int, seed: int, *stream: int) -> tuple[np.ndarray, bool]:
    """(sign vectors, exact): all 2^n of them when 2^n ≤ n_resamples, else n_resamples random ones."""
    if 2**n <= n_resamples:  # every sign vector once: the exact p-value
        return np.array(list(itertools.product((1.0, -1.0), repeat=n))), True
    return rng_for(seed, *stream).integers(0, 2, size=(n_resamples, n)) * 2.0 - 1.0, False


def flip_p(d: np.ndarray, signs: tuple[np.ndarray, bool]) -> np.ndarray:
    """The sign-flip p-value of each column of d (n × k, n ≥ 1) under `sign_matrix`'s sign vectors."""
    s, exact = signs
    n = len(d)
    observed = np.abs(d.mean(axis=0))
    extreme = np.abs(s @ d / n) >= observed - _TIE
    if exact:
        return extreme.mean(axis=0)
    return (1.0 + extreme.sum(axis=0)) / (1.0 + len(s))  # the observed signs count as one draw


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts b and c (binomial, p = ½)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(1.0, 2 * tail / 2**n)


# -- scores ----------------------------------------------------------------------------------
@dataclass
class Comparison:
    """A paired difference of two agents' mean task scores over the tasks both were judged on."""

    a: str
    b: str
    diff: float
    ci95: tuple[float, float]
    p_value: float
    p_holm: float
    n_tasks: int
    ci_reason: str | None = None
    """Why ci95 is no interval (NaN): under 2 shared tasks, or no spread (`no_interval`); None when it is one."""

    @property
    def holds(self) -> bool:
        """The difference holds at 0.05 after Holm's adjustment across all pairs."""
        return self.p_holm < ALPHA

    def as_json(self) -> dict:
        return {"a": self.a, "b": self.b, "diff": finite(self.diff), "ci95": interval(self.ci95),
                "ci95_reason": self.ci_reason, "p_value": self.p_value, "p_holm": self.p_holm, "n_tasks": self.n_tasks,
                "holds_at_0.05": self.holds}


@dataclass
class ScoreUncertainty:
    """Bootstrap intervals of one judge's agent scores and their paired comparisons; an interval
    that cannot be given is (NaN, NaN) with its reason in `ci_reason` / `domain_ci_reason`."""

    ci95: dict[str, tuple[float, float]]
    domain_ci95: dict[str, dict[str, tuple[float, float]]]
    comparisons: list[Comparison]
    seed: int
    resamples: int
    ci_reason: dict[str, str] = field(default_factory=dict)
    """agent → why its ci95 is no interval (only agents without one)."""
    domain_ci_reason: dict[str, dict[str, str]] = field(default_factory=dict)
    """agent → domain → why its domain interval is no interval (only those without one)."""
    n_tasks: dict[str, int] = field(default_factory=dict)
    """agent → tasks behind its mean and interval."""
    domain_n_tasks: dict[str, dict[str, int]] = field(default_factory=dict)
    """agent → domain → tasks of that domain behind its domain mean and interval."""

    def settings(self) -> dict:
        return {"method": METHOD, "level": LEVEL, "unit": "task", "resamples": self.resamples, "seed": self.seed,
                "test": "paired sign-flip permutation over tasks, Holm-adjusted across pairs",
                "min_tasks": MIN_UNITS}


def _pair(x: np.ndarray) -> tuple[float, float]:
    return float(x[0]), float(x[1])


def finite(x: float | None) -> float | None:
    """A float for JSON: NaN (undefined, e.g. no shared task) becomes None."""
    return None if x is None or math.isnan(x) else float(x)


def interval(ci: Sequence[float] | None) -> list[float | None] | None:
    """[lo, hi] for JSON, None when undefined."""
    return None if ci is None or any(math.isnan(v) for v in ci) else [float(ci[0]), float(ci[1])]


def column_cis(m: np.ndarray, tids: Sequence[str], rows: Sequence[int], n_resamples: int, seed: int,
               *stream: int) -> list[tuple[tuple[float, float], str | None, int]]:
    """(ci, reason, n) of the mean of each column of m over `rows`, leaving out its NaN cells (tasks
    an agent was not scored on). Columns with every row share one draw of tasks (`stream`), so
    adding an agent changes no other agent's interval; a column with gaps draws its own tasks
    (`stream` + the names of its tasks)."""
    out: list[tuple[tuple[float, float], str | None, int]] = [((math.nan, math.nan), "n=0: no interval", 0)] * m.shape[1]
    sub = m[list(rows)]
    full = [j for j in range(m.shape[1]) if len(rows) and not np.isnan(sub[:, j]).any()]
    if full:
        cis = percentile_ci(bootstrap_means(sub[:, full], n_resamples, seed, *stream), n_units=len(rows))
        for j, c in zip(full, cis, strict=True):
            out[j] = (*checked(c, len(rows)), len(rows))
    for j in set(range(m.shape[1])) - set(full):
        own = [r for r in rows if not np.isnan(m[r, j])]
        if own:
            names = name_stream(*(tids[r] for r in own))
            c = mean_ci(m[own, j], n_resamples, seed, *stream, names)[0]
            out[j] = (*checked(c, len(own)), len(own))
    return out


def score_uncertainty(task_scores: dict[str, dict[str, float]], judged: dict[str, set[str]] | None = None,
                      domains: dict[str, str] | None = None, *, n_resamples: int = DEFAULT_RESAMPLES,
                      seed: int = DEFAULT_SEED) -> ScoreUncertainty:
    """Intervals and comparisons from per-task scores (agent → task → mean over runs of eq. 1).

    The overall score is the mean of the task scores (every run covers every task), so one
    task-level count matrix, shared by all agents, resamples each task with all its runs.
    `judged` (agent → tasks with any judgment) picks the tasks a pair shares; `domains`
    (task → domain) gives the per-domain intervals, resampled within each domain. Without
    `judged`, every pair shares the tasks both have scores for; without `domains`, no per-domain
    intervals. A task absent from an agent's scores (a cell not scored in a published table) is
    left out of that agent's interval and of its pairs only.
    """
    agents = list(task_scores)
    tids = list(dict.fromkeys(t for a in agents for t in task_scores[a]))
    judged = {a: set(task_scores[a]) & set(task_scores[a] if judged is None else judged.get(a, ())) for a in agents}
    domains = domains or {}
    m = np.array([[task_scores[a].get(t, np.nan) for a in agents] for t in tids], dtype=np.float64)
    m = m.reshape(len(tids), len(agents))
    u = ScoreUncertainty({}, {a: {} for a in agents}, [], seed, n_resamples,
                         domain_n_tasks={a: {} for a in agents})
    for a, (ci, why, n) in zip(agents, column_cis(m, tids, range(len(tids)), n_resamples, seed, 0), strict=True):
        u.ci95[a], u.n_tasks[a] = ci, n
        if why:
            u.ci_reason[a] = why
    for dom in sorted({domains[t] for t in tids if t in domains}):
        rows = [i for i, t in enumerate(tids) if domains.get(t) == dom]
        for a, (ci, why, n) in zip(agents, column_cis(m, tids, rows, n_resamples, seed, 1, name_stream(dom)), strict=True):
            if n:
                u.domain_ci95[a][dom], u.domain_n_tasks[a][dom] = ci, n
            if n and why:
                u.domain_ci_reason.setdefault(a, {})[dom] = why
    u.comparisons = compare_agents(m, tids, agents, judged, n_resamples=n_resamples, seed=seed)
    return u


def compare_agents(m: np.ndarray, tids: Sequence[str], agents: Sequence[str], judged: dict[str, set[str]], *,
                   n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> list[Comparison]:
    """Every pair (in the given agent order, a before b): paired bootstrap CI and sign-flip p over shared tasks.

    Pairs sharing the same task set share one count matrix and one sign matrix; their resamples
    are drawn and summarised (interval, p-value) a block of pairs at a time (`pair_blocks`), so
    memory grows with the resamples and the tasks, never with the number of pairs.
    """
    pairs = list(itertools.combinations(range(len(agents)), 2))
    member = [frozenset(r for r, t in enumerate(tids) if t in judged.get(a, ())) for a in agents]
    groups: dict[tuple[int, ...], list[int]] = {}
    for k, (i, j) in enumerate(pairs):
        groups.setdefault(tuple(sorted(member[i] & member[j])), []).append(k)
    diff, ci, p, n = np.full(len(pairs), np.nan), np.full((len(pairs), 2), np.nan), np.ones(len(pairs)), [0] * len(pairs)
    for rows, ks in groups.items():
        for k in ks:
            n[k] = len(rows)
        if not rows:
            continue
        stream = name_stream(*(tids[r] for r in rows))  # one per distinct set of shared tasks
        counts = resample_counts(len(rows), n_resamples, rng_for(seed, 2, stream))
        signs = sign_matrix(len(rows), n_resamples, seed, 3, stream)
        sub = m[list(rows)]
        for block in pair_blocks(ks, n_resamples):
            d = sub[:, [pairs[k][0] for k in block]] - sub[:, [pairs[k][1] for k in block]]
            diff[block] = np.ascontiguousarray(d.T).mean(axis=1)  # each pair's mean alone: no ulp from its block
            ci[block] = percentile_ci(means_from_counts(counts, d), n_units=len(rows))
            p[block] = flip_p(d, signs)
    adj = holm([float(x) for x in p])
    out = []
    for k, (i, j) in enumerate(pairs):
        c, why = checked(ci[k], n[k])
        out.append(Comparison(agents[i], agents[j], float(diff[k]), c, float(p[k]), adj[k], n[k], why))
    return out


MAX_AGENTS = 1000
"""Most agents (systems) compared pairwise in one ranking: memory per pair is bounded, but the
pairs themselves (and every output listing them) grow with the square of the agents: 499,500 at the cap."""


def too_many_agents(n: int) -> str | None:
    """Why `n` agents cannot be compared pairwise (past MAX_AGENTS), or None."""
    if n <= MAX_AGENTS:
        return None
    return (f"{n} systems: at most {MAX_AGENTS} can be compared pairwise ({n * (n - 1) // 2} pairs; the pairs "
            "grow with the square of the systems); rank a subset")


BLOCK_CELLS = 2**22
"""Resampled pair differences held at once (32 MiB of float64): what bounds `compare_agents`' memory."""


def pair_blocks(ks: Sequence[int], n_resamples: int) -> list[list[int]]:
    """`ks` cut into blocks of at most BLOCK_CELLS // n_resamples pairs (at least one)."""
    width = max(1, BLOCK_CELLS // max(1, n_resamples))
    return [list(ks[s:s + width]) for s in range(0, len(ks), width)]
