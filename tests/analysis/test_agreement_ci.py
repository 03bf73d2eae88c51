"""Agreement intervals: the clustered bootstrap against the point metrics, naive intervals, scipy, judge against judge."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from lifesearch_local.analysis.agreement import Item, auroc, ece, item_metrics, kappa
from lifesearch_local.analysis.agreement_ci import (
    cluster,
    judge_ci,
    kendall_rows,
    metrics_from_sums,
    spearman_rows,
)


def table_items(tp: int, fn: int, fp: int, tn: int) -> list[Item]:
    """A 2×2 table (label × decision) as items, one report each."""
    cells = [(True, True)] * tp + [(True, False)] * fn + [(False, True)] * fp + [(False, False)] * tn
    return [Item(("t", "a", i, "r"), y, [d], [None]) for i, (y, d) in enumerate(cells)]


def test_kappa_on_a_hand_computed_two_by_two():
    # TP 20, FN 5, FP 10, TN 15: p_o = 35/50 = .7, p_e = .6·.5 + .4·.5 = .5, κ = (.7 − .5)/.5 = .4
    items = table_items(20, 5, 10, 15)
    assert kappa([it.decisions[0] for it in items], [it.label for it in items]) == pytest.approx(0.4)
    c = cluster(items)
    point = metrics_from_sums(c.sums.sum(axis=0)[None], c.runs)
    assert point["kappa"][0] == pytest.approx(0.4) and point["accuracy_mean"][0] == pytest.approx(0.7)


def random_items(rng: np.random.Generator, n_reports: int, per_report: int, runs: int = 3) -> list[Item]:
    items = []
    for k in range(n_reports):
        skill = rng.beta(4, 2)  # the judge is better on some reports than on others
        for r in range(per_report):
            y = bool(rng.random() < 0.5)
            dec = [None if rng.random() < 0.03 else (y if rng.random() < skill else not y) for _ in range(runs)]
            p = [None if d is None else round(float(np.clip((0.8 if d else 0.2) + rng.normal(0, 0.15), 0, 1)), 2)
                 for d in dec]
            items.append(Item((f"t{k // 3}", f"a{k % 3}", 0, f"r{r}"), y, dec, p))
    return items


def test_resampled_metrics_equal_agreement_py_on_the_full_sample():
    """The sums the bootstrap resamples reproduce agreement.py's metrics exactly when every report is drawn once."""
    from lifesearch_local.analysis.agreement_ci import resampled_metrics

    items = random_items(np.random.default_rng(2), 20, 8)
    c = cluster(items)
    once = resampled_metrics(c, np.ones((1, c.n_reports)))
    want = item_metrics(items)
    for m in ("accuracy_mean", "kappa", "majority_accuracy", "ece", "auroc"):
        assert once[m][0] == pytest.approx(want[m], abs=1e-12), m
    pooled = [(it.label, p) for it in items for p in it.p_true if p is not None]
    assert want["auroc"] == pytest.approx(auroc([y for y, _ in pooled], [p for _, p in pooled]))
    assert want["ece"] == pytest.approx(ece([y for y, _ in pooled], [p for _, p in pooled]))


def test_clustered_interval_is_wider_than_naive_on_correlated_decisions():
    items = random_items(np.random.default_rng(4), 40, 15, runs=1)
    clustered = judge_ci(items)
    naive = judge_ci([Item(("t", "a", i, "r"), it.label, it.decisions, it.p_true) for i, it in enumerate(items)])
    for m in ("accuracy_mean", "kappa"):
        wide, narrow = np.diff(clustered[m])[0], np.diff(naive[m])[0]
        assert wide > 1.3 * narrow, (m, wide, narrow)


def test_rank_correlations_per_row_match_scipy():
    rng = np.random.default_rng(8)
    x = rng.integers(0, 4, size=(50, 6)).astype(float)  # many ties
    y = rng.integers(0, 4, size=(50, 6)).astype(float)
    rho, tau = spearman_rows(x, y), kendall_rows(x, y)
    for i in range(50):
        want_rho, want_tau = spearmanr(x[i], y[i]).statistic, kendalltau(x[i], y[i]).statistic
        assert (np.isnan(rho[i]) and np.isnan(want_rho)) or rho[i] == pytest.approx(want_rho)
        assert (np.isnan(tau[i]) and np.isnan(want_tau)) or tau[i] == pytest.approx(want_tau)


def test_a_judge_against_its_copy_and_against_a_worse_one():
    from lifesearch_local.analysis.agreement_ci import judge_vs_judge

    items = random_items(np.random.default_rng(6), 30, 6, runs=1)
    flipped = [Item(it.key, it.label, [it.label if k % 3 else (not it.label)], it.p_true)  # wrong on every 3rd
               for k, it in enumerate(items)]
    same, worse, _ = judge_vs_judge({"a": items, "copy": list(items), "flip": flipped}, n_resamples=2000)
    # a copy agrees on every report: no spread, so no interval rather than [0, 0]
    assert same["diff_accuracy_mean"] == {"diff": 0.0, "ci95": None, "ci95_reason": "no spread: no interval"}
    assert same["mcnemar"]["b"] == same["mcnemar"]["c"] == 0 and same["mcnemar"]["p_value"] == 1.0
    right = np.array([it.decisions[0] == it.label for it in items])
    want_b = int(np.sum(right & ~np.array([it.decisions[0] == it.label for it in flipped])))
    assert (worse["a"], worse["b"]) == ("a", "flip") and worse["mcnemar"]["b"] == want_b
    assert same["paired_test"]["p_value"] == 1.0 and same["paired_test"]["diff"] == 0.0
    assert worse["paired_test"]["diff"] == worse["diff_accuracy_mean"]["diff"]
    assert worse["paired_test"]["ci95"] == worse["diff_accuracy_mean"]["ci95"]


# -- the judge-vs-judge test by simulation ---------------------------------------------------------------
# Monte-Carlo bound: a rejection rate over R replications is asserted within 3 binomial standard deviations,
# 3·√(0.05·0.95/R), of the nominal 5%.
REPS = 1000
N_REPORTS, RUBRICS = 40, 10


def skilled_judges(rng: np.random.Generator, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """reps × reports × rubrics right/wrong of two judges with the same accuracy and a per-report skill each:
    error logit = logit(0.15) + 1.2·z, z ~ N(0, 1) per report and judge (the audit's design)."""
    logit = np.log(0.15 / 0.85) + 1.2 * rng.standard_normal((2, reps, N_REPORTS, 1))
    wrong = rng.random((2, reps, N_REPORTS, RUBRICS)) < 1 / (1 + np.exp(-logit))
    return ~wrong[0], ~wrong[1]


def test_the_report_level_test_keeps_its_level_under_report_level_skill():
    from lifesearch_local.analysis.agreement_ci import Clustered, paired_test

    right_a, right_b = skilled_judges(np.random.default_rng(11), REPS)
    p = []
    for ra, rb in zip(right_a, right_b, strict=True):
        ca, cb = (Clustered(N_REPORTS, 1, np.c_[np.full(N_REPORTS, RUBRICS), r.sum(axis=1)], None, None, None)
                  for r in (ra, rb))
        p.append(paired_test(ca, cb, {"diff": 0.0, "ci95": None}, n_resamples=500, seed=len(p))["p_value"])
    rate = float(np.mean(np.array(p) < 0.05))
    assert abs(rate - 0.05) <= 3 * np.sqrt(0.05 * 0.95 / REPS), rate


def test_mcnemar_fails_the_same_check():
    from lifesearch_local.analysis.resampling import mcnemar_exact

    right_a, right_b = skilled_judges(np.random.default_rng(12), 300)
    b = (right_a & ~right_b).sum(axis=(1, 2))
    c = (~right_a & right_b).sum(axis=(1, 2))
    rate = np.mean([mcnemar_exact(int(x), int(y)) < 0.05 for x, y in zip(b, c, strict=True)])
    assert rate > 0.05 + 3 * np.sqrt(0.05 * 0.95 / 300), rate  # decisions treated as independent: far too many


def test_auroc_over_the_pair_cap_gets_the_clustered_interval(monkeypatch):
    from lifesearch_local.analysis import agreement_ci
    from lifesearch_local.analysis.clustered_auc import clustered_auc

    items = random_items(np.random.default_rng(9), 40, 10)
    boot = judge_ci(items, n_resamples=500)["auroc"]
    monkeypatch.setattr(agreement_ci, "_AUROC_MAX_PAIRS", 1)  # as if the report × report matrix would not fit
    got = judge_ci(items, n_resamples=500)["auroc"]
    assert got == clustered_auc(*cluster(items).p_true)[1] and got != boot
    assert abs((got[1] - got[0]) - (boot[1] - boot[0])) < 0.3 * (boot[1] - boot[0])  # about as wide as the bootstrap


def test_agree_says_which_auroc_interval_it_gave(monkeypatch):
    from lifesearch_local.analysis import agreement_ci
    from lifesearch_local.analysis.agreement import agreement
    from lifesearch_local.analysis.clustered_auc import METHOD
    from lifesearch_local.analysis.labels import label_index
    from lifesearch_local.records import Judgment, Label
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks
    from tests.helpers.inputs import AGREE

    tasks, js = load_tasks(AGREE / "tasks.jsonl"), read_records(AGREE / "judgments.jsonl", Judgment)
    labels = label_index(read_records(AGREE / "labels.jsonl", Label))
    for cap, method in ((agreement_ci._AUROC_MAX_PAIRS, None), (1, {"auroc": METHOD})):
        monkeypatch.setattr(agreement_ci, "_AUROC_MAX_PAIRS", cap)
        result = agreement(tasks, js, labels)
        agreement_ci.agreement_uncertainty(tasks, js, labels, result, n_resamples=200)
        assert result["choice-a"].get("ci95_method") == method  # choice-a has p_true (AUROC 1.0 on this fixture)
