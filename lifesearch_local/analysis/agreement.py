"""Judge agreement with reference labels (paper §3.5, Table 3): pure functions, no I/O.

Definitions (each judge config = one `Judgment.judge`; its repetitions are `judge_run`s):
- items: the labelled rubrics, matched to judgments on (task_id, agent, run, rubric_id);
  a labelled rubric some judge run did not decide is an error, not a silent drop.
- accuracy: share of items whose decision equals the label; an ungraded decision
  (satisfied null) counts as wrong and is counted in `ungraded`. `accuracy_mean` is the
  mean of the per-run accuracies.
- chance_accuracy: the chance baseline of accuracy, the accuracy of always answering the labels'
  more common class (majority-class rate, max(p, 1 − p) for a share p of true labels). A judge at
  or below it has learnt nothing from the reports; κ's chance baseline is 0.
- self-consistency: share of items with the same decision in every judge run (ungraded
  is a decision value here); null with a single run, where it is undefined.
- majority vote (over judge runs, "RunMaj" in tables; not the majority-class baseline): the
  decision with more graded votes; a tie goes to the decision of the
  first judge run that graded the item (so it is never worse-defined than a single
  pass); an item nobody graded stays ungraded (wrong).
- kappa: Cohen's kappa pooled over all (judge run, item) pairs, an ungraded decision
  taken as the opposite of the label (a disagreement, as for accuracy); equals the
  usual single-pass kappa with one run; null when judge and labels use one and the same
  class (undefined: 0/0).
- with `p_true`: ROC AUC, ECE and the best threshold, pooled over (judge run, item)
  pairs that carry a `p_true`. ECE uses 10 equal-width bins of `p_true` as sklearn's
  `calibration_curve` draws them ((k/10, (k+1)/10], the first bin closed at 0):
  Σ_b (n_b / N)·|share of true labels in b − mean p_true in b|. The best threshold t
  ("true iff p_true ≥ t") maximises accuracy, ties going to the t nearest 0.5 (then the
  higher t); "never true" is the candidate just above 1.0. All null when no `p_true` (or, for AUROC, when
  the labels hold one class).
- ranking: each agent is scored with `scoring.score_agents` over the tasks where it has
  labels, restricted to the labelled rubrics (so partial labels compare like with like),
  once from the labels and once per judge run from the judge's decisions (judge runs
  averaged; a rubric labelled in one agent run but not another counts as unsatisfied
  on both sides); then Spearman's rho and Kendall's tau-b (both handle ties) between the
  two score vectors; null with fewer than two agents or when one side is constant.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from lifesearch_local.analysis.labels import Key, fmt_key, key_of
from lifesearch_local.analysis.scoring import AgentScore, judge_name, score_runs
from lifesearch_local.errors import LifesearchError
from lifesearch_local.records import Judgment, Task

BREAKDOWNS = ("language", "domain", "type", "necessity", "priority")
METRIC_KEYS = (
    "accuracy_mean", "chance_accuracy", "self_consistency", "majority_accuracy", "kappa", "auroc", "ece",
    "best_threshold", "best_threshold_accuracy", "n", "n_runs", "ungraded",
)  # fmt: skip
N_BINS = 10

@dataclass
class Item:
    """One labelled rubric with one judge's decisions, one per judge run (in run order)."""

    key: Key
    label: bool
    decisions: list[bool | None]
    p_true: list[float | None]
    attrs: dict[str, str] = field(default_factory=dict)


def _none_if_nan(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


# -- items ----------------------------------------------------------------------------------
def rubric_attrs(tasks: Sequence[Task]) -> dict[tuple[str, str], dict[str, str]]:
    """(task_id, rubric_id) → the breakdown attributes of that rubric."""
    return {
        (t.id, r.id): {
            "language": t.language,
            "domain": t.domain.value,
            "type": r.type,
            "necessity": r.necessity,
            "priority": r.priority,
        }
        for t in tasks
        for r in t.rubrics
    }


def collect_items(
    tasks: Sequence[Task], judgments: Sequence[Judgment], labels: dict[Key, bool]
) -> tuple[list[Item], list[int]]:
    """The labelled items of ONE judge config, with its decisions per judge run, and the runs."""
    attrs = rubric_attrs(tasks)
    known_tasks = {t.id for t in tasks}
    runs = sorted({j.judge_run for j in judgments})
    got: dict[tuple[int, Key], Judgment] = {}
    for j in judgments:
        k = (j.judge_run, key_of(j))
        if k[1] in labels and k in got and got[k].satisfied != j.satisfied:
            raise LifesearchError(f"conflicting judgments by {judge_name(j)} for {fmt_key(k[1])}")
        got[k] = j
    items: list[Item] = []
    for k, label in labels.items():
        if k[0] not in known_tasks:
            raise LifesearchError(f"label for unknown task {k[0]!r} ({fmt_key(k)}); is this the tasks file that was "
                                  "labelled?")
        if (k[0], k[3]) not in attrs:
            raise LifesearchError(f"label for unknown rubric: {fmt_key(k)}; is this the tasks file that was labelled?")
        missing = [r for r in runs if (r, k) not in got]
        if missing:
            n = sum(1 for r in runs for kk in labels if (r, kk) not in got)
            raise LifesearchError(
                f"{n} labelled rubric decision(s) have no judgment by judge {judgments[0].judge!r} "
                f"(first: {fmt_key(k)}, judge run {missing[0]}); judge the labelled reports "
                "in every run, or restrict the labels (--label-source)"
            )
        js = [got[(r, k)] for r in runs]
        items.append(Item(k, label, [j.satisfied for j in js], [j.p_true for j in js], attrs[(k[0], k[3])]))
    return items, runs


# -- metrics on items -------------------------------------------------------------------
def accuracy(decisions: Sequence[bool | None], labels: Sequence[bool]) -> float:
    """Share of decisions equal to their label; ungraded (None) is wrong."""
    pairs = list(zip(decisions, labels, strict=True))
    return sum(1 for d, y in pairs if d == y) / len(pairs)


def _vs(d: bool | None, y: bool) -> int:
    """A decision as 0/1 for comparison with label y; ungraded becomes the wrong class."""
    return int(not y) if d is None else int(d)


def self_consistency(items: Sequence[Item]) -> float | None:
    """Share of items whose decisions agree across all judge runs; None with one run."""
    if not items or len(items[0].decisions) < 2:
        return None
    return statistics.fmean(1.0 if len(set(it.decisions)) == 1 else 0.0 for it in items)


def majority_class_rate(labels: Sequence[bool]) -> float | None:
    """Accuracy of always answering the labels' more common class (accuracy's chance baseline); None without labels."""
    if not labels:
        return None
    yes = sum(1 for y in labels if y)
    return max(yes, len(labels) - yes) / len(labels)


def majority_decision(decisions: Sequence[bool | None]) -> bool | None:
    """More graded votes win; a tie goes to the first graded run; none graded → None."""
    yes = sum(1 for d in decisions if d is True)
    no = sum(1 for d in decisions if d is False)
    if yes != no:
        return yes > no
    return next((d for d in decisions if d is not None), None)


def kappa(decisions: Sequence[bool | None], labels: Sequence[bool]) -> float | None:
    """Cohen's kappa of decisions vs labels (ungraded = disagreement); None when undefined."""
    d = [_vs(x, y) for x, y in zip(decisions, labels, strict=True)]
    y = [int(x) for x in labels]
    n, agree, d1, y1 = len(y), sum(1 for a, b in zip(d, y) if a == b), sum(d), sum(y)
    # (p_o − p_e) / (1 − p_e) times n²/n², in integer counts: a constant judge is exactly 0
    chance = d1 * y1 + (n - d1) * (n - y1)
    return None if chance == n * n else (agree * n - chance) / (n * n - chance)


def auroc(labels: Sequence[bool], p: Sequence[float]) -> float | None:
    """ROC AUC of p_true against the labels (the Mann-Whitney U statistic, ties counting one
    half); None when a class is absent."""
    from scipy.stats import rankdata

    pos = sum(1 for x in labels if x)
    neg = len(labels) - pos
    if not pos or not neg:
        return None
    ranks = rankdata(p)  # average ranks of tied p_true
    rank_sum = sum(r for r, x in zip(ranks, labels) if x)
    return float((rank_sum - pos * (pos + 1) / 2) / (pos * neg))


def ece(labels: Sequence[bool], p: Sequence[float], n_bins: int = N_BINS) -> float | None:
    """Expected calibration error of p_true over equal-width bins, right-closed ((k/n, (k+1)/n],
    the first closed at 0, as sklearn's `calibration_curve` bins)."""
    import numpy as np

    if not p:
        return None
    y = np.asarray([int(x) for x in labels], dtype=float)
    prob = np.asarray(p, dtype=float)
    bins = np.searchsorted(np.linspace(0.0, 1.0, n_bins + 1)[1:-1], prob)  # side="left": right-closed
    counts = np.bincount(bins, minlength=n_bins)
    gap = np.abs(np.bincount(bins, weights=y, minlength=n_bins) - np.bincount(bins, weights=prob, minlength=n_bins))
    return float(np.sum(gap[counts > 0]) / len(prob))  # Σ_b n_b/N·|true_b/n_b − Σp_b/n_b|


def best_threshold(labels: Sequence[bool], p: Sequence[float]) -> tuple[float | None, float | None]:
    """(t, accuracy) of the rule "true iff p_true ≥ t" with the best accuracy (ties → t nearest 0.5, then higher)."""
    import numpy as np

    if not p:
        return None, None
    y = np.asarray([int(x) for x in labels])
    prob = np.asarray(p, dtype=float)
    # Every distinct p_true, highest first, is a threshold (O(n log n)), after "never true".
    order = np.argsort(-prob, kind="stable")
    ps, ys = prob[order], y[order]
    last = np.r_[ps[1:] != ps[:-1], True]  # the last of each run of equal p_true
    tp, fp = np.cumsum(ys)[last], np.cumsum(1 - ys)[last]
    neg = len(y) - int(y.sum())
    thr = np.r_[math.nextafter(max(1.0, float(ps[0])), math.inf), ps[last]]
    correct = np.r_[neg, tp + neg - fp]
    best = np.flatnonzero(correct == correct.max())
    i = best[np.argmin(np.abs(thr[best] - 0.5))]
    return float(thr[i]), float(correct[i] / len(y))


def confusion(items: Sequence[Item]) -> dict:
    """Label (true, false) × decision (true, false, ungraded) counts, pooled over judge runs."""
    from collections import Counter

    counts = Counter((it.label, d) for it in items for d in it.decisions)
    return {"labels": ["true", "false"], "decisions": ["true", "false", "ungraded"],
            "counts": [[counts[(y, d)] for d in (True, False, None)] for y in (True, False)]}


def item_metrics(items: Sequence[Item]) -> dict[str, float | int | None]:
    """Every per-judge metric (see the module docstring) over a set of items."""
    n_runs = len(items[0].decisions) if items else 0
    labels = [it.label for it in items]
    per_run = [accuracy([it.decisions[r] for it in items], labels) for r in range(n_runs)]
    pooled_d = [d for it in items for d in it.decisions]
    pooled_y = [it.label for it in items for _ in it.decisions]
    with_p = [(it.label, p) for it in items for p in it.p_true if p is not None]
    py, pp = [y for y, _ in with_p], [p for _, p in with_p]
    thr, thr_acc = best_threshold(py, pp)
    return {
        "accuracy_mean": statistics.fmean(per_run) if per_run else None,
        "chance_accuracy": majority_class_rate(labels),
        "self_consistency": self_consistency(items),
        "majority_accuracy": accuracy([majority_decision(it.decisions) for it in items], labels) if items else None,
        "kappa": kappa(pooled_d, pooled_y) if items else None,
        "auroc": auroc(py, pp) if pp else None,
        "ece": ece(py, pp),
        "best_threshold": thr,
        "best_threshold_accuracy": thr_acc,
        "n": len(items),
        "n_runs": n_runs,
        "ungraded": sum(1 for d in pooled_d if d is None),
    }


def breakdowns(items: Sequence[Item], by: Sequence[str] = BREAKDOWNS) -> dict[str, dict[str, dict]]:
    """attribute → value → item_metrics of the items with that value (values sorted)."""
    out: dict[str, dict[str, dict]] = {}
    for attr in by:
        groups: dict[str, list[Item]] = defaultdict(list)
        for it in items:
            groups[it.attrs[attr]].append(it)
        out[attr] = {v: item_metrics(groups[v]) for v in sorted(groups)}
    return out


# -- report level ------------------------------------------------------------------------
def labelled_rubrics(items: Sequence[Item]) -> dict[str, dict[str, set[str]]]:
    """agent → task → the ids of its labelled rubrics: what an agent is scored over in agreement."""
    out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for it in items:
        out[it.key[1]][it.key[0]].add(it.key[3])
    return out


def agent_scores(
    tasks: Sequence[Task], decisions: dict[Key, bool | None], labelled: dict[str, dict[str, set[str]]]
) -> dict[str, float]:
    """agent → mean score (scoring.score_agents) from decisions by key, each agent over its
    labelled tasks with only their labelled rubrics (`labelled`: agent → task → rubric ids)."""
    return {a: row.overall_mean for a, row in agent_rows(tasks, decisions, labelled).items()}


def agent_rows(
    tasks: Sequence[Task], decisions: dict[Key, bool | None], labelled: dict[str, dict[str, set[str]]]
) -> dict[str, AgentScore]:
    """agent → its score row (overall and per task, as agent_scores defines them)."""
    by_id = {t.id: t for t in tasks}
    # agent → run → task → rubric → decision, in one pass (what score_agents builds from Judgment records;
    # building those records for every decision made this the slowest step at scale)
    runs_of: dict[str, dict[int, dict[str, dict[str, bool | None]]]] = defaultdict(dict)
    for k, d in decisions.items():
        runs_of[k[1]].setdefault(k[2], {}).setdefault(k[0], {})[k[3]] = d
    out: dict[str, AgentScore] = {}
    for agent, per_task in labelled.items():
        mine = [by_id[tid].model_copy(update={"rubrics": [r for r in by_id[tid].rubrics if r.id in rids]})
                for tid, rids in per_task.items()]  # fmt: skip
        mine = [t for t in mine if t.total_weight > 0]  # only zero-weight rubrics labelled: no score
        keep = {t.id for t in mine}
        runs = {run: {t: v for t, v in got.items() if t in keep} for run, got in runs_of.get(agent, {}).items()}
        runs = {run: got for run, got in runs.items() if got}
        if runs:
            out[agent] = score_runs(agent, runs, mine)
    return out


# Two agents always give ρ = τ = ±1: a ranking needs at least three to say anything.
MIN_RANK_AGENTS = 3


def rank_correlation(judge_scores: dict[str, float], label_scores: dict[str, float]) -> tuple[float | None, float | None]:
    """(Spearman rho, Kendall tau-b) between two agent → score maps, over their shared agents
    (None below MIN_RANK_AGENTS shared agents)."""
    from scipy.stats import kendalltau, spearmanr

    agents = sorted(set(judge_scores) & set(label_scores))
    if len(agents) < MIN_RANK_AGENTS:
        return None, None
    a = [judge_scores[x] for x in agents]
    b = [label_scores[x] for x in agents]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: nan, reported as null
        rho = spearmanr(a, b).statistic
        tau = kendalltau(a, b).statistic
    return _none_if_nan(rho), _none_if_nan(tau)


def ranking_agreement(tasks: Sequence[Task], items: Sequence[Item]) -> tuple[float | None, float | None, int]:
    """Rank correlation of agents scored by the judge (runs averaged) and by the labels, and the
    number of agents ranked."""
    agents_tasks = labelled_rubrics(items)
    by_label = agent_scores(tasks, {it.key: it.label for it in items}, agents_tasks)
    n_runs = len(items[0].decisions) if items else 0
    per_run = [agent_scores(tasks, {it.key: it.decisions[r] for it in items}, agents_tasks) for r in range(n_runs)]
    by_judge = {a: statistics.fmean(s[a] for s in per_run) for a in by_label} if per_run else {}
    return (*rank_correlation(by_judge, by_label), len(set(by_judge) & set(by_label)))


# -- everything ----------------------------------------------------------------------------
def judge_agreement(tasks: Sequence[Task], judgments: Sequence[Judgment], labels: dict[Key, bool]) -> dict:
    """All metrics of ONE judge config (all its runs): item_metrics + `by` + rank correlations."""
    items, _ = collect_items(tasks, judgments, labels)
    out = item_metrics(items)
    out["by"] = breakdowns(items)
    out["confusion"] = confusion(items)
    out["rank_spearman"], out["rank_kendall"], out["rank_agents"] = ranking_agreement(tasks, items)
    return out


def agreement(
    tasks: Sequence[Task],
    judgments: Sequence[Judgment],
    labels: dict[Key, bool],
    *,
    exclude: Iterable[str] = (),
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict]:
    """judge id → judge_agreement, sorted by mean accuracy (best first); `exclude` drops judge ids."""
    skip = set(exclude)
    groups: dict[str, list[Judgment]] = defaultdict(list)
    for j in judgments:
        if j.judge not in skip:
            groups[j.judge].append(j)
    if not groups:
        raise LifesearchError("no judgments to compare with the labels" + (" (the label judge is excluded)" if skip else ""))
    out = {}
    for judge, js in groups.items():
        if progress:
            progress(judge)
        out[judge] = judge_agreement(tasks, js, labels)
    return dict(sorted(out.items(), key=lambda kv: -(kv[1]["accuracy_mean"] or 0.0)))
