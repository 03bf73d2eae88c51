"""Uncertainty of judge agreement: cluster bootstrap over reports, judge vs judge (paired CI, report-level test), rank CIs.

A report's rubric decisions share the report (its length, its topic, the judge's mood on
it), so they are not independent: resampling decisions one by one would make the
intervals too narrow. The unit of resampling is the report (task, agent, agent run);
every metric of `agreement.item_metrics` that gets an interval here is a function of sums
over reports, so B resamples are one count matrix C (B × reports) times a per-report
table of sums. Definitions: docs/statistics.md.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lifesearch_local.analysis import resampling as stats
from lifesearch_local.analysis.agreement import (
    MIN_RANK_AGENTS,
    N_BINS,
    Item,
    agent_rows,
    collect_items,
    labelled_rubrics,
)
from lifesearch_local.analysis.clustered_auc import METHOD as CLUSTERED_AUC
from lifesearch_local.analysis.clustered_auc import clustered_auc
from lifesearch_local.analysis.labels import Key
from lifesearch_local.records import Judgment, Task

CI_METRICS = ("accuracy_mean", "kappa", "auroc", "majority_accuracy", "ece")
_AUROC_MAX_PAIRS = 50_000_000
"""Positive × negative decision pairs above which AUROC gets no interval (its report × report matrix would not fit)."""


@dataclass
class Clustered:
    """One judge's labelled decisions summed per report (the resampling unit)."""

    n_reports: int
    runs: int
    sums: np.ndarray
    """reports × [items, correct decisions, decisions == true (ungraded = wrong class), true labels × runs,
    majority correct, then per ECE bin: decisions with p_true, true labels, Σ p_true]."""
    auroc_w: np.ndarray | None
    """reports × reports: Σ over (positive in row report, negative in column report) of [p⁺ > p⁻] + ½[p⁺ = p⁻]."""
    pos: np.ndarray
    neg: np.ndarray
    p_true: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    """(p_true, label, report) of every decision with a p_true: for clustered_auc where auroc_w is too large."""


def report_index(items: Sequence[Item]) -> tuple[np.ndarray, int]:
    """Each item's report (task, agent, run) as an index in order of first appearance, and the count."""
    ids: dict[tuple, int] = {}
    return np.array([ids.setdefault(it.key[:3], len(ids)) for it in items], dtype=np.int64), len(ids)


def cluster(items: Sequence[Item], *, auroc: bool = True) -> Clustered:
    """Per-report sums of everything the resampled metrics need (vectorised over items: linear in decisions).
    `auroc=False` skips the report × report Mann-Whitney matrix (for callers that want no AUROC interval)."""
    k, n_rep = report_index(items)
    runs = len(items[0].decisions) if items else 0
    n = len(items)
    lab = np.fromiter((it.label for it in items), dtype=bool, count=n)
    dec = np.array([[-1 if d is None else int(d) for d in it.decisions] for it in items], dtype=np.int8).reshape(n, runs)
    pt = np.array([[np.nan if p is None else p for p in it.p_true] for it in items], dtype=float).reshape(n, runs)
    cols = np.zeros((n, 5 + 3 * N_BINS))
    cols[:, 0] = 1
    cols[:, 1] = (dec == lab[:, None]).sum(axis=1)  # ungraded (−1) is never right
    cols[:, 2] = np.where(dec == -1, ~lab[:, None], dec).sum(axis=1)  # ungraded taken as the wrong class (_vs)
    cols[:, 3] = lab * runs
    cols[:, 4] = _majority_right(dec, lab)
    has_p = ~np.isnan(pt)
    item_of, _ = np.nonzero(has_p)  # item-major, run order: as the loop over items and their runs
    p_vals = pt[has_p]
    bins = np.searchsorted(np.linspace(0.0, 1.0, N_BINS + 1)[1:-1], p_vals)  # the bins of agreement.ece
    p_lab = lab[item_of]
    np.add.at(cols, (item_of, 5 + bins), 1.0)
    np.add.at(cols, (item_of, 5 + N_BINS + bins), p_lab.astype(float))
    np.add.at(cols, (item_of, 5 + 2 * N_BINS + bins), p_vals)
    sums = np.zeros((n_rep, cols.shape[1]))
    np.add.at(sums, k, cols)
    pk = k[item_of]
    pos = np.bincount(pk[p_lab], minlength=n_rep).astype(float)
    neg = np.bincount(pk[~p_lab], minlength=n_rep).astype(float)
    w = _auroc_matrix(p_vals, p_lab, pk, n_rep) if auroc else None
    return Clustered(n_rep, runs, sums, w, pos, neg, (p_vals, p_lab, pk))


def _majority_right(dec: np.ndarray, lab: np.ndarray) -> np.ndarray:
    """agreement.majority_decision(...) == label per item, from the items × runs decisions (1, 0, −1 ungraded)."""
    yes, no = (dec == 1).sum(axis=1), (dec == 0).sum(axis=1)
    graded = dec != -1
    first = dec[np.arange(len(dec)), np.argmax(graded, axis=1)] if dec.shape[1] else np.zeros(len(dec), np.int8)
    tie_right = graded.any(axis=1) & ((first == 1) == lab)
    return np.where(yes != no, (yes > no) == lab, tie_right)


def _auroc_matrix(p: np.ndarray, lab: np.ndarray, k: np.ndarray, n_rep: int) -> np.ndarray | None:
    """The report × report Mann-Whitney matrix (None without both classes, or when too large)."""
    pp, pn = p[lab], p[~lab]
    if not len(pp) or not len(pn) or len(pp) * len(pn) > _AUROC_MAX_PAIRS:
        return None
    one_hot_neg = np.zeros((len(pn), n_rep))
    one_hot_neg[np.arange(len(pn)), k[~lab]] = 1.0
    w = np.zeros((n_rep, n_rep))
    kp = k[lab]
    for s in range(0, len(pp), 1024):  # chunks keep the pair matrix small
        h = (pp[s:s + 1024, None] > pn[None, :]) + 0.5 * (pp[s:s + 1024, None] == pn[None, :])
        np.add.at(w, kp[s:s + 1024], h @ one_hot_neg)
    return w


def metrics_from_sums(t: np.ndarray, runs: int) -> dict[str, np.ndarray]:
    """accuracy_mean, majority_accuracy, kappa, ece from (B × columns) resampled sums (NaN where undefined)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        n = t[:, 0] * runs
        agree, d1, y1 = t[:, 1], t[:, 2], t[:, 3]
        chance = d1 * y1 + (n - d1) * (n - y1)
        kappa = np.where(n * n == chance, np.nan, (agree * n - chance) / (n * n - chance))
        counts = t[:, 5:5 + N_BINS]
        gap = np.abs(t[:, 5 + N_BINS:5 + 2 * N_BINS] - t[:, 5 + 2 * N_BINS:])
        n_p = counts.sum(axis=1)
        return {
            "accuracy_mean": agree / n,
            "majority_accuracy": t[:, 4] / t[:, 0],
            "kappa": kappa,
            "ece": np.where(n_p > 0, gap.sum(axis=1) / n_p, np.nan),
        }


def resampled_metrics(c: Clustered, counts: np.ndarray) -> dict[str, np.ndarray]:
    """Every CI metric on each of the B resamples given by `counts` (B × reports)."""
    out = metrics_from_sums(counts @ c.sums, c.runs)
    if c.auroc_w is None:
        out["auroc"] = np.full(len(counts), np.nan)
    else:
        u = np.einsum("bk,bk->b", counts @ c.auroc_w, counts)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["auroc"] = u / ((counts @ c.pos) * (counts @ c.neg))
    return out


def judge_ci(items: Sequence[Item], *, n_resamples: int = stats.DEFAULT_RESAMPLES, seed: int = stats.DEFAULT_SEED,
             metrics: Sequence[str] = CI_METRICS) -> dict[str, list[float] | None]:
    """metric → 95% cluster-bootstrap interval over reports (None when undefined on every resample)."""
    if not items:
        return dict.fromkeys(metrics)
    c = cluster(items, auroc="auroc" in metrics)
    parts = [resampled_metrics(c, counts)
             for counts in stats.count_chunks(c.n_reports, n_resamples, stats.rng_for(seed, 0))]
    boot = {m: np.concatenate([p[m] for p in parts]) for m in metrics}
    out = {m: stats.interval(stats.percentile_ci(boot[m], n_units=c.n_reports)[0]) for m in metrics}
    if "auroc" in metrics and c.auroc_w is None and c.p_true is not None and _over_cap(c):
        out["auroc"] = clustered_auc(*c.p_true)[1]  # the bootstrap's report × report matrix would not fit
    return out


def _over_cap(c: Clustered) -> bool:
    return float(c.pos.sum()) * float(c.neg.sum()) > _AUROC_MAX_PAIRS


# -- judge vs judge -----------------------------------------------------------------------
def judge_vs_judge(items: Mapping[str, Sequence[Item]], *, n_resamples: int = stats.DEFAULT_RESAMPLES,
                   seed: int = stats.DEFAULT_SEED) -> list[dict]:
    """Every pair of judges (in the given order) on the same labelled decisions: the difference in
    accuracy_mean and κ with a paired cluster-bootstrap CI (one count matrix for both judges), the
    report-level paired test (`paired_test`), and, for reference only, McNemar's exact test on the first
    judge run's correct/wrong decisions (decision-level: anti-conservative when skill varies by report)."""
    names = [j for j, its in items.items() if its]
    clusters = {j: cluster(items[j], auroc=False) for j in names}
    resampled: dict[tuple, dict[str, np.ndarray]] = {}
    out = []
    for a, b in itertools.combinations(names, 2):
        ia, ib = items[a], items[b]
        if [it.key for it in ia] != [it.key for it in ib]:
            continue  # different labelled decisions: not paired (collect_items gives both the label order)
        ca, cb = clusters[a], clusters[b]
        for j, c in ((a, ca), (b, cb)):  # the same draw of reports for both (one stream per report count)
            if (j, c.n_reports) not in resampled:
                boot = stats.resampled_sums(c.sums, n_resamples, stats.rng_for(seed, 0))
                resampled[(j, c.n_reports)] = metrics_from_sums(boot, c.runs)
        ma, mb = resampled[(a, ca.n_reports)], resampled[(b, cb.n_reports)]
        pa, pb = metrics_from_sums(ca.sums.sum(axis=0)[None], ca.runs), metrics_from_sums(cb.sums.sum(axis=0)[None], cb.runs)
        right_a = np.array([it.decisions[0] == it.label for it in ia])
        right_b = np.array([it.decisions[0] == it.label for it in ib])
        n_b, n_c = int(np.sum(right_a & ~right_b)), int(np.sum(~right_a & right_b))
        entry = {"a": a, "b": b, "n": len(ia), "n_reports": ca.n_reports}
        for m in ("accuracy_mean", "kappa"):
            ci = stats.interval(stats.percentile_ci(ma[m] - mb[m], n_units=ca.n_reports)[0])
            why = stats.no_interval(ci, ca.n_reports)
            entry[f"diff_{m}"] = {"diff": stats.finite(float(pa[m][0] - pb[m][0])), "ci95": None if why else ci,
                                  "ci95_reason": why}
        entry["paired_test"] = paired_test(ca, cb, entry["diff_accuracy_mean"], n_resamples=n_resamples, seed=seed)
        entry["mcnemar"] = {"b": n_b, "c": n_c, "p_value": stats.mcnemar_exact(n_b, n_c),
                            "what": "b = items a got right and b wrong, c = the reverse (first judge run); "
                                    "decision-level, ignores that decisions cluster in reports (too many false "
                                    "positives when judges' skill varies by report): use paired_test"}
        out.append(entry)
    return out


PAIRED_METHOD = "report-level sign-flip permutation of the per-report accuracy differences (two-sided)"


def paired_test(ca: Clustered, cb: Clustered, diff: Mapping, *, n_resamples: int = stats.DEFAULT_RESAMPLES,
                seed: int = stats.DEFAULT_SEED) -> dict:
    """Judge a vs judge b on the same labelled decisions, by report: D_k = a's correct decisions − b's in
    report k (each judge's runs averaged), diff = ΣD_k / decisions (= the difference in accuracy_mean);
    under "same accuracy" each report's D_k is as likely to be −D_k, so p = share of sign flips of the D_k
    with |Σ s·D| ≥ |ΣD| (exact over all 2^k when 2^k ≤ B). The report is the unit, as in the interval
    (`diff`: the paired cluster bootstrap's diff_accuracy_mean block)."""
    d = ca.sums[:, 1] / ca.runs - cb.sums[:, 1] / cb.runs
    p = float(stats.sign_flip_p(d, n_resamples, seed, 4)[0])
    return {"method": PAIRED_METHOD, "p_value": p, "diff": diff["diff"], "ci95": diff["ci95"],
            "ci95_reason": diff.get("ci95_reason"), "n_reports": ca.n_reports, "level": stats.LEVEL}


# -- rankings ------------------------------------------------------------------------------
def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row pair (average ranks for ties); NaN for a constant row."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x, axis=1), rankdata(y, axis=1)
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (rx * ry).sum(axis=1) / np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))


def kendall_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each row pair; NaN when one row is constant."""
    i, j = np.triu_indices(x.shape[1], 1)
    sx, sy = np.sign(x[:, i] - x[:, j]), np.sign(y[:, i] - y[:, j])
    with np.errstate(divide="ignore", invalid="ignore"):
        return (sx * sy).sum(axis=1) / np.sqrt((sx * sx).sum(axis=1) * (sy * sy).sum(axis=1))


def rank_ci(tasks: Sequence[Task], items: Sequence[Item], *, n_resamples: int = stats.DEFAULT_RESAMPLES,
            seed: int = stats.DEFAULT_SEED) -> dict[str, list[float] | None]:
    """95% intervals of Spearman's rho and Kendall's tau-b between the agents' scores under the judge
    and under the labels (agreement.ranking_agreement), resampling tasks (a task's reports of every
    agent together); None below three agents. Resamples where an agent draws none of its tasks, or
    one side is constant, are left out."""
    none = {"rank_spearman": None, "rank_kendall": None}
    labelled = labelled_rubrics(items)
    by_label = agent_rows(tasks, {it.key: it.label for it in items}, labelled)
    runs = len(items[0].decisions) if items else 0
    per_run = [agent_rows(tasks, {it.key: it.decisions[r] for it in items}, labelled) for r in range(runs)]
    agents = sorted(a for a in by_label if all(a in p for p in per_run))
    if len(agents) < MIN_RANK_AGENTS or not runs:
        return none
    tids = sorted({t for a in agents for t in by_label[a].tasks})
    lab = np.array([[by_label[a].tasks.get(t, np.nan) for a in agents] for t in tids])
    jud = np.mean([[[p[a].tasks.get(t, np.nan) for a in agents] for t in tids] for p in per_run], axis=0)
    have = ~np.isnan(lab)
    counts = stats.resample_counts(len(tids), n_resamples, stats.rng_for(seed, 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        n = counts @ have
        sl, sj = counts @ np.where(have, lab, 0.0) / n, counts @ np.where(have, jud, 0.0) / n
    ok = (n > 0).all(axis=1)
    nt = len(tids)
    return {"rank_spearman": stats.interval(stats.percentile_ci(spearman_rows(sj[ok], sl[ok]), n_units=nt)[0]),
            "rank_kendall": stats.interval(stats.percentile_ci(kendall_rows(sj[ok], sl[ok]), n_units=nt)[0])}


def _no_zero_width(metrics: Mapping, ci: dict[str, list[float] | None], n_tasks: int) -> tuple[dict, dict[str, str]]:
    """The intervals with those that are none (under 2 units, zero width) set to None, and why: a
    zero-width interval would read as certainty. A metric with no value (—) needs no reason."""
    out, why = {}, {}
    for m, c in ci.items():
        units = n_tasks if m.startswith("rank_") else metrics["n_reports"]
        reason = None if metrics.get(m) is None else stats.no_interval(c, units)
        out[m] = None if reason else c
        if reason:
            why[m] = reason
    return out, why


def _auroc_pairs(items: Sequence[Item]) -> int:
    """Positive × negative (p_true, label) pairs behind AUROC: above _AUROC_MAX_PAIRS it gets no interval."""
    pos = sum(p is not None for it in items if it.label for p in it.p_true)
    neg = sum(p is not None for it in items if not it.label for p in it.p_true)
    return pos * neg


# -- everything ----------------------------------------------------------------------------
def agreement_uncertainty(tasks: Sequence[Task], judgments: Sequence[Judgment], labels: dict[Key, bool],
                          result: dict[str, dict], *, n_resamples: int = stats.DEFAULT_RESAMPLES,
                          seed: int = stats.DEFAULT_SEED) -> dict:
    """Add `ci95` (metric → [lo, hi]; None where there is no interval, with the reason in `ci95_reason`)
    and `n_reports` to each judge of `agreement.agreement`'s result (in place) and return
    {"bootstrap": settings, "judge_vs_judge": [...]} for its judges, in its order."""
    groups: dict[str, list[Judgment]] = defaultdict(list)
    for j in judgments:
        if j.judge in result:
            groups[j.judge].append(j)
    items = {name: collect_items(tasks, groups[name], labels)[0] for name in result}
    for name, its in items.items():
        ci = judge_ci(its, n_resamples=n_resamples, seed=seed)
        ci.update(rank_ci(tasks, its, n_resamples=n_resamples, seed=seed))
        result[name]["n_reports"] = report_index(its)[1]
        result[name]["ci95"], result[name]["ci95_reason"] = _no_zero_width(result[name], ci, len({it.key[0] for it in its}))
        if result[name].get("auroc") is not None and _auroc_pairs(its) > _AUROC_MAX_PAIRS:
            result[name]["ci95_method"] = {"auroc": CLUSTERED_AUC}  # not the bootstrap: its matrix would not fit
    settings = {"method": stats.METHOD, "level": stats.LEVEL, "unit": "report (task, agent, run); tasks for ρ/τ",
                "resamples": n_resamples, "seed": seed}
    return {"bootstrap": settings, "judge_vs_judge": judge_vs_judge(items, n_resamples=n_resamples, seed=seed)}
