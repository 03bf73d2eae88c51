"""Statistics that can fail: coverage and type-I error by simulation, widths, hand-computed tests.

Every simulation has a fixed seed, so a pass or a failure reproduces exactly. The coverage
check is run on a deliberately wrong interval too (decisions resampled one by one instead of
tasks) and must reject it: a check that passes everything would be a defect.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from lifesearch_local.analysis import resampling as stats
from lifesearch_local.analysis.agreement import Item, auroc, ece, item_metrics, kappa
from lifesearch_local.analysis.agreement_ci import (
    cluster,
    judge_ci,
    kendall_rows,
    metrics_from_sums,
    spearman_rows,
)

N_SETS = 1000
TRUE_SCORE = 0.6  # E[task score] of the simulation: Beta(3, 2) difficulty, Bernoulli rubrics


def simulate(rng: np.random.Generator, n_sets: int, n_tasks: int, n_rubrics: int = 12, runs: int = 3) -> np.ndarray:
    """n_sets × n_tasks × runs × n_rubrics 0/1 decisions: a task's rubrics and runs share its difficulty
    q ~ Beta(3, 2) (mean 0.6), so the true score (mean over the task population) is exactly 0.6."""
    q = rng.beta(3.0, 2.0, size=(n_sets, n_tasks, 1, 1))
    return (rng.random((n_sets, n_tasks, runs, n_rubrics)) < q).astype(np.float64)


def ci_tasks(y: np.ndarray, seed: int) -> np.ndarray:
    """The right interval: tasks resampled with all their runs and rubrics (what `score` does)."""
    return stats.mean_ci(y.mean(axis=(1, 2)), n_resamples=1000, seed=seed)[0]


def ci_rubrics(y: np.ndarray, seed: int) -> np.ndarray:
    """A wrong interval: rubrics resampled instead of tasks (every (task, rubric) decision, averaged
    over runs, as if independent); its mean is the same score."""
    return stats.mean_ci(y.mean(axis=1).reshape(-1), n_resamples=1000, seed=seed)[0]


def coverage(ci_fn, n_tasks: int = 30) -> float:
    sets = simulate(np.random.default_rng(7), N_SETS, n_tasks)
    cis = np.array([ci_fn(sets[i], seed=i) for i in range(N_SETS)])
    return float(np.mean((cis[:, 0] <= TRUE_SCORE) & (cis[:, 1] >= TRUE_SCORE)))


@pytest.mark.parametrize(("ci_fn", "right"), [(ci_tasks, True), (ci_rubrics, False)], ids=["tasks", "rubrics-wrong"])
def test_coverage_of_the_task_bootstrap(ci_fn, right):
    """1,000 simulated benchmarks with a known true score: the 95% CI must cover it 93–97% of the
    time; the rubric-level interval (too narrow: it ignores that a task's rubrics are correlated)
    must fail the same check."""
    cov = coverage(ci_fn)
    assert (0.93 <= cov <= 0.97) is right, f"coverage {cov:.3f}"
    if not right:
        assert cov < 0.8  # not a near miss: the wrong interval is badly too narrow


def test_width_shrinks_as_one_over_root_n():
    rng = np.random.default_rng(11)
    widths = {}
    for n in (100, 400, 1600):
        y = simulate(rng, 1, n)[0].mean(axis=(1, 2))
        lo, hi = stats.mean_ci(y)[0]
        widths[n] = hi - lo
    assert widths[100] / widths[400] == pytest.approx(2.0, rel=0.12)
    assert widths[400] / widths[1600] == pytest.approx(2.0, rel=0.12)


def test_percentile_interval_of_a_known_sample():
    samples = np.arange(1001, dtype=float)  # quantiles 2.5% and 97.5% of 0..1000 are 25 and 975
    assert stats.percentile_ci(samples)[0] == pytest.approx([25.0, 975.0])
    assert stats.percentile_ci(np.array([np.nan, 1.0, 1.0]))[0].tolist() == [1.0, 1.0]  # NaN resamples left out


def test_expanded_percentile_tail():
    """α' of the expanded percentile interval: 2·Φ(−√(n/(n−1))·t_{n−1}(.975)), by hand for n = 11."""
    from statistics import NormalDist

    t10 = 2.2281388519649385  # t quantile .975 with 10 degrees of freedom
    assert stats.expanded_alpha(11) == pytest.approx(2 * NormalDist().cdf(-((11 / 10) ** 0.5) * t10), rel=1e-9)
    assert stats.expanded_alpha(None) == pytest.approx(0.05) and stats.expanded_alpha(1) == pytest.approx(0.05)
    assert 0.05 > stats.expanded_alpha(400) > 0.049  # tends to the nominal tail


def test_resample_counts_draw_n_units_per_resample():
    c = stats.resample_counts(7, 500, np.random.default_rng(0))
    assert c.shape == (500, 7) and (c.sum(axis=1) == 7).all()
    assert 0.9 < c.mean() / 1.0 < 1.1  # each unit drawn once per resample on average


# -- paired comparisons ---------------------------------------------------------------------
def test_sign_flip_type_one_error_is_five_percent():
    """Null data (two agents' task scores exchangeable): p < 0.05 in about 5% of 1,000 sets."""
    rng = np.random.default_rng(3)
    q = rng.beta(3.0, 2.0, size=(N_SETS, 40))
    a = rng.binomial(12, q) / 12
    b = rng.binomial(12, q) / 12
    p = np.array([stats.sign_flip_p(a[i] - b[i], n_resamples=1000, seed=i)[0] for i in range(N_SETS)])
    assert 0.035 <= np.mean(p < 0.05) <= 0.065, np.mean(p < 0.05)
    # and it is not a test that never rejects: a 10-point shift is found almost always
    shifted = np.clip(a + 0.10, 0, 1)
    p1 = np.array([stats.sign_flip_p(shifted[i] - b[i], n_resamples=1000, seed=i)[0] for i in range(200)])
    assert np.mean(p1 < 0.05) > 0.8


def test_sign_flip_exact_by_hand():
    # d = (1, 2, 3): |mean| = 2; of the 8 sign vectors only (+,+,+) and (−,−,−) reach |mean| ≥ 2
    assert stats.sign_flip_p(np.array([1.0, 2.0, 3.0]))[0] == pytest.approx(2 / 8)
    # d = (1, 1, 1, −3): mean 0, every vector reaches it
    assert stats.sign_flip_p(np.array([1.0, 1.0, 1.0, -3.0]))[0] == 1.0


def test_identical_agents_give_zero_difference_and_p_one():
    rng = np.random.default_rng(5)
    tids = [f"t{i}" for i in range(50)]
    scores = dict(zip(tids, rng.random(50).tolist(), strict=True))
    other = dict(zip(tids, rng.random(50).tolist(), strict=True))
    u = stats.score_uncertainty({"a": scores, "copy": dict(scores), "b": other}, {x: set(tids) for x in ("a", "copy", "b")},
                                dict.fromkeys(tids, "company"))
    same = next(c for c in u.comparisons if {c.a, c.b} == {"a", "copy"})
    assert same.diff == 0.0 and same.ci95 == (0.0, 0.0) and same.p_value == 1.0 and same.p_holm == 1.0
    assert not same.holds and same.n_tasks == 50


def test_pairs_use_only_shared_tasks():
    tids = ["t1", "t2", "t3", "t4"]
    a = {"t1": 1.0, "t2": 1.0, "t3": 0.0, "t4": 0.0}
    b = {"t1": 0.0, "t2": 0.5, "t3": 0.0, "t4": 0.0}
    u = stats.score_uncertainty({"a": a, "b": b}, {"a": {"t1", "t2", "t3", "t4"}, "b": {"t1", "t2"}},
                                dict.fromkeys(tids, "policy"))
    (c,) = u.comparisons
    assert c.n_tasks == 2 and c.diff == pytest.approx(0.75)  # (1 − 0 + 1 − 0.5) / 2
    assert c.p_value == pytest.approx(0.5)  # exact over 4 sign vectors: (+,+) and (−,−) reach 0.75


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04, 0.5 × (4, 3, 2, 1) = .04, .09, .08, .5 → monotone .04, .09, .09, .5
    assert stats.holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert stats.holm([0.9, 0.8]) == [1.0, 1.0] and stats.holm([]) == []


def test_same_input_same_output_byte_for_byte():
    rng = np.random.default_rng(9)
    tids = [f"t{i}" for i in range(30)]
    scores = {a: dict(zip(tids, rng.random(30).tolist(), strict=True)) for a in "xyz"}
    judged = {a: set(tids) for a in scores}
    doms = {t: ("policy", "company")[i % 2] for i, t in enumerate(tids)}
    runs = [stats.score_uncertainty(scores, judged, doms) for _ in range(2)]
    dump = [json.dumps([u.ci95, u.domain_ci95, [c.as_json() for c in u.comparisons], u.settings()]) for u in runs]
    assert dump[0] == dump[1]
    other_seed = stats.score_uncertainty(scores, judged, doms, seed=1)
    assert other_seed.ci95 != runs[0].ci95  # the seed is used
    # adding an agent changes no other agent's interval (one shared task resampling)
    more = stats.score_uncertainty({**scores, "w": scores["x"]}, {**judged, "w": set(tids)}, doms)
    assert {a: more.ci95[a] for a in "xyz"} == runs[0].ci95


# -- agreement ------------------------------------------------------------------------------
def test_mcnemar_exact_by_hand():
    assert stats.mcnemar_exact(1, 6) == pytest.approx(2 * 8 / 128)  # P(X ≤ 1), X ~ Bin(7, ½) = 8/128
    assert stats.mcnemar_exact(5, 0) == pytest.approx(2 / 32)
    assert stats.mcnemar_exact(3, 3) == 1.0 and stats.mcnemar_exact(0, 0) == 1.0


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


# -- through the commands ---------------------------------------------------------------------
AGREE = Path(__file__).resolve().parent / "fixtures" / "agree"


def cli(capsys, *argv: str) -> str:
    from lifesearch_local.cli import main

    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_score_json_carries_intervals_and_comparisons(capsys):
    from lifesearch_local.analysis.scoring import score_by_judge
    from lifesearch_local.records import Judgment
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks

    argv = ("score", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl"),
            "--judge", "choice-a#1", "--json", "--resamples", "2000")
    first, again = cli(capsys, *argv), cli(capsys, *argv)
    assert first == again  # byte-identical
    out = json.loads(first)
    assert out["bootstrap"]["seed"] == stats.DEFAULT_SEED and out["bootstrap"]["resamples"] == 2000
    rows = score_by_judge(load_tasks(AGREE / "tasks.jsonl"), read_records(AGREE / "judgments.jsonl", Judgment),
                          judge="choice-a#1")["choice-a#1"]
    for agent, row in rows.items():
        tasks = np.array(list(row.tasks.values()))
        want = stats.percentile_ci(stats.bootstrap_means(tasks, 2000), n_units=len(tasks))[0]
        assert out["agents"][agent]["ci95"] == want.tolist()  # the scale of overall_mean, stream 0
        assert out["agents"][agent]["ci95"][0] <= out["agents"][agent]["overall_mean"] <= out["agents"][agent]["ci95"][1]
    pairs = {(c["a"], c["b"]) for c in out["comparisons"]}
    assert pairs == {("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma")}
    assert all(set(c) >= {"a", "b", "diff", "ci95", "p_value", "p_holm", "n_tasks"} for c in out["comparisons"])
    assert out["comparisons"][0]["diff"] == pytest.approx(rows["alpha"].overall_mean - rows["beta"].overall_mean)
    other = json.loads(cli(capsys, *argv, "--seed", "1"))
    assert other["bootstrap"]["seed"] == 1  # recorded (that the seed changes draws: test_same_input_same_output…)


def test_score_table_and_csv(capsys):
    import csv
    import io

    from lifesearch_local.output.csv_rows import SCORE_COLUMNS

    base = ("score", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl"),
            "--judge", "choice-a#1", "--resamples", "500")
    table = cli(capsys, *base, "--compare")
    assert "Mean [95% CI]" in table and "68.8 [" in table and "none of the 3 pairwise differences holds" in table
    assert "Paired comparisons" in table
    rows = list(csv.DictReader(io.StringIO(cli(capsys, *base, "--csv"))))
    assert tuple(rows[0]) == SCORE_COLUMNS
    overall = {r["agent"]: r for r in rows if r["metric"] == "overall"}
    assert set(overall) == {"alpha", "beta", "gamma"} and float(overall["alpha"]["value"]) == pytest.approx(0.6875)
    assert float(overall["alpha"]["ci_lo"]) <= 0.6875 <= float(overall["alpha"]["ci_hi"])
    assert [(r["agent"], r["other"]) for r in rows if r["metric"] == "diff"] == [
        ("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma")]


def test_agree_json_csv_and_disagreements(capsys):
    import csv
    import io

    from lifesearch_local.output.csv_rows import AGREE_COLUMNS, DISAGREEMENT_COLUMNS

    base = ("agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl"),
            "--labels", str(AGREE / "labels.jsonl"), "--resamples", "1000")
    out = json.loads(cli(capsys, *base, "--json"))
    for judge, m in out["judges"].items():
        assert set(m["ci95"]) >= {"accuracy_mean", "kappa", "auroc", "majority_accuracy", "ece"}, judge
        lo, hi = m["ci95"]["accuracy_mean"]
        assert lo <= m["accuracy_mean"] <= hi and m["n_reports"] == 6
    assert out["bootstrap"]["resamples"] == 1000
    vs = {(c["a"], c["b"]): c for c in out["judge_vs_judge"]}
    assert vs[("choice-a", "const")]["mcnemar"] == {**vs[("choice-a", "const")]["mcnemar"], "b": 7, "c": 0}
    assert vs[("choice-a", "const")]["mcnemar"]["p_value"] == pytest.approx(2 / 2**7)
    rows = list(csv.DictReader(io.StringIO(cli(capsys, *base, "--csv"))))
    assert tuple(rows[0]) == AGREE_COLUMNS and {"diff_accuracy_mean", "diff_kappa"} <= {r["metric"] for r in rows}
    dis = json.loads(cli(capsys, *base, "--disagreements", "--json"))
    conf = [d["confidence"] for d in dis["disagreements"]]
    known = [c for c in conf if c is not None]
    assert known == sorted(known, reverse=True) and conf[: len(known)] == known  # confident mistakes first
    assert all(d["verdict"] != d["label"] for d in dis["disagreements"])
    # every wrong decision is listed: accuracy × decisions = right ones
    wrong = sum(round((1 - m["accuracy_mean"]) * m["n"] * m["n_runs"]) for m in out["judges"].values())
    assert dis["n_disagreements"] == wrong == len(dis["disagreements"])
    drows = list(csv.DictReader(io.StringIO(cli(capsys, *base, "--disagreements", "--csv"))))
    assert tuple(drows[0]) == DISAGREEMENT_COLUMNS and len(drows) == wrong


def test_a_judge_against_its_copy_and_against_a_worse_one():
    from lifesearch_local.analysis.agreement_ci import judge_vs_judge

    items = random_items(np.random.default_rng(6), 30, 6, runs=1)
    flipped = [Item(it.key, it.label, [it.label if k % 3 else (not it.label)], it.p_true)  # wrong on every 3rd
               for k, it in enumerate(items)]
    same, worse, _ = judge_vs_judge({"a": items, "copy": list(items), "flip": flipped}, n_resamples=2000)
    assert same["diff_accuracy_mean"] == {"diff": 0.0, "ci95": [0.0, 0.0]}
    assert same["mcnemar"]["b"] == same["mcnemar"]["c"] == 0 and same["mcnemar"]["p_value"] == 1.0
    right = np.array([it.decisions[0] == it.label for it in items])
    want_b = int(np.sum(right & ~np.array([it.decisions[0] == it.label for it in flipped])))
    assert (worse["a"], worse["b"]) == ("a", "flip") and worse["mcnemar"]["b"] == want_b


def test_disagreements_order_and_content():
    from lifesearch_local.analysis.disagreements import disagreements
    from lifesearch_local.records import Judgment, Task

    task = Task.model_validate({"id": "t", "language": "en", "domain": "company", "question": "q", "rubrics": [
        {"id": f"r{i}", "criterion": f"c{i}", "type": "Objective", "necessity": "Explicit", "priority": "Must Have",
         "weight": 1.0} for i in range(5)]})
    labels = {("t", "a", 0, f"r{i}"): True for i in range(5)}
    js = [Judgment(task_id="t", agent="a", rubric_id="r0", judge="j", satisfied=True, p_true=0.9),   # right
          Judgment(task_id="t", agent="a", rubric_id="r1", judge="j", satisfied=False, p_true=0.4),  # conf .6
          Judgment(task_id="t", agent="a", rubric_id="r2", judge="j", satisfied=False, p_true=0.05),  # conf .95
          Judgment(task_id="t", agent="a", rubric_id="r3", judge="j", satisfied=None, reason="no JSON"),
          Judgment(task_id="t", agent="a", rubric_id="r4", judge="ref", satisfied=False, p_true=0.0)]  # excluded
    got = disagreements([task], js, labels, exclude=["ref"])
    assert [d["rubric_id"] for d in got] == ["r2", "r1", "r3"]
    assert got[0]["confidence"] == pytest.approx(0.95) and got[0]["criterion"] == "c2" and got[0]["label"] is True
    assert got[2]["verdict"] is None and got[2]["confidence"] is None and got[2]["reason"] == "no JSON"
