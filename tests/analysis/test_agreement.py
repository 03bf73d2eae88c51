"""Judge-agreement metrics on hand-computed cases and on the agree fixtures."""

from __future__ import annotations

import math

import pytest

from lifesearch_local.analysis import agreement as ag
from lifesearch_local.analysis.labels import label_index
from lifesearch_local.errors import LifesearchError
from lifesearch_local.records import Judgment

T, F, U = True, False, None


def items(rows: list[tuple[bool, list]]) -> list[ag.Item]:
    """Items from (label, decisions per judge run); keys and attributes are placeholders."""
    return [ag.Item(("t", "a", 0, f"r{i}"), y, list(d), [None] * len(d), {}) for i, (y, d) in enumerate(rows)]


# -- single metrics ---------------------------------------------------------------------
def test_accuracy_counts_ungraded_as_wrong():
    assert ag.accuracy([T, F, U, T], [T, T, F, T]) == 0.5
    assert ag.accuracy([U, U], [T, F]) == 0.0


def test_self_consistency_by_hand():
    its = items([(T, [T, T, T]), (T, [T, F, T]), (F, [U, U, U]), (F, [F, F, F])])
    assert ag.self_consistency(its) == 0.75  # the all-ungraded item is consistent, [T,F,T] is not
    assert ag.self_consistency(items([(T, [T, U])])) == 0.0
    assert ag.self_consistency(items([(T, [T]), (F, [T])])) is None  # single run: undefined


def test_majority_decision_and_ties():
    assert ag.majority_decision([T, F, T]) is True
    assert ag.majority_decision([F, F, T]) is False
    assert ag.majority_decision([T, F]) is True  # tie → first graded run
    assert ag.majority_decision([F, T]) is False
    assert ag.majority_decision([U, T, F]) is True
    assert ag.majority_decision([U, F]) is False
    assert ag.majority_decision([U, U]) is None


def test_chance_accuracy_is_the_majority_class_rate_of_the_labels():
    """Found in use: the chance baseline beside each judge (a constant judge can score "fair" accuracy)."""
    m = ag.item_metrics(items([(T, [F]), (F, [F]), (F, [F]), (F, [T])]))
    assert m["chance_accuracy"] == 0.75 and m["accuracy_mean"] == 0.5  # worse than always answering "false"
    assert ag.item_metrics(items([(T, [T]), (T, [T]), (F, [F])]))["chance_accuracy"] == pytest.approx(2 / 3)
    assert ag.item_metrics([])["chance_accuracy"] is None


def test_majority_accuracy_by_hand():
    its = items([(T, [T, F, T]), (F, [T, T, F]), (F, [F, T]), (T, [U, U, U])])
    m = ag.item_metrics(its[:2])
    assert m["majority_accuracy"] == 0.5  # [T,F,T]→T right; [T,T,F]→T wrong
    assert ag.accuracy([ag.majority_decision(it.decisions) for it in its[2:]], [F, T]) == 0.5  # tie→F right; none→wrong


def test_kappa_by_hand():
    # p_o = 3/4; p_e = .5·.25 + .5·.75 = .5 → κ = .25/.5
    assert ag.kappa([T, F, F, F], [T, T, F, F]) == pytest.approx(0.5)


def test_kappa_constant_judge_is_zero():
    assert ag.kappa([T, T, T, T], [T, F, T, F]) == 0.0
    assert ag.kappa([F, F, F], [T, F, F]) == 0.0


def test_kappa_ungraded_is_a_disagreement_and_undefined_is_none():
    # [T, U] vs [T, F]: U becomes T (the wrong class) → judge constant T → κ = 0
    assert ag.kappa([T, U], [T, F]) == 0.0
    assert ag.kappa([T, T], [T, T]) is None  # one class on both sides: 0/0


def test_auroc_by_hand():
    # positive/negative pairs (.9,.8) (.9,.1) (.7,.8) (.7,.1): 3 of 4 ordered right
    assert ag.auroc([T, F, T, F], [0.9, 0.8, 0.7, 0.1]) == pytest.approx(0.75)
    assert ag.auroc([T, T], [0.2, 0.3]) is None


def test_auroc_counts_a_tied_pair_as_one_half():
    # pairs (.8,.8) tie → ½, (.8,.2) 1, (.5,.8) 0, (.5,.2) 1: 2.5 of 4
    assert ag.auroc([T, F, T, F], [0.8, 0.8, 0.5, 0.2]) == pytest.approx(0.625)
    assert ag.auroc([T, F, F], [0.5, 0.5, 0.5]) == pytest.approx(0.5)


def test_ece_by_hand_four_items():
    # bin (.9, 1]: mean p .94, share true .5 → .44 × 2/4; bin (.1, .2]: mean p .15, share 0 → .15 × 2/4
    assert ag.ece([T, F, F, F], [0.91, 0.97, 0.12, 0.18]) == pytest.approx(0.22 + 0.075)


def test_ece_bin_edges_are_right_closed():
    # 0.1 falls in [0, .1] and 0.12 in (.1, .2]: .5·|1 − .1| + .5·|0 − .12|; one shared bin would give .39
    assert ag.ece([T, F], [0.1, 0.12]) == pytest.approx(0.51)
    assert ag.ece([], []) is None


def test_best_threshold_by_hand_tie_nearest_half():
    # t=.7 → acc .75; t=.9 → acc .75; t=.8 → .5; t=.1 → .5; never → .5
    assert ag.best_threshold([T, F, T, F], [0.9, 0.8, 0.7, 0.1]) == (0.7, 0.75)
    t, acc = ag.best_threshold([F, F], [0.9, 0.8])
    assert t > 1.0 and acc == 1.0  # "never true" wins
    assert ag.best_threshold([], []) == (None, None)


def test_best_threshold_and_ece_match_brute_force():
    import random

    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 60)
        y = [rng.random() < 0.4 for _ in range(n)]
        p = [round(rng.random(), rng.choice([1, 2, 6])) for _ in range(n)]  # coarse values make ties
        never = math.nextafter(1.0, 2.0)
        cands = sorted(set(p)) + [never]
        accs = {t: sum((pi >= t) == yi for pi, yi in zip(p, y, strict=True)) / n for t in cands}
        best = max(accs.values())
        t_want = min((t for t in cands if accs[t] == best), key=lambda t: (abs(t - 0.5), -t))
        t, acc = ag.best_threshold(y, p)
        assert acc == pytest.approx(best)
        assert t == t_want
        bins: dict[int, list[int]] = {}
        for i, pi in enumerate(p):
            bins.setdefault(max(0, math.ceil(round(pi * 10, 9)) - 1), []).append(i)
        want = sum(len(ix) / n * abs(sum(y[i] for i in ix) / len(ix) - sum(p[i] for i in ix) / len(ix)) for ix in bins.values())
        assert ag.ece(y, p) == pytest.approx(want)


def test_rank_correlation_with_ties_by_hand():
    # label ranks [1.5, 1.5, 3], judge ranks [1, 2, 3]: ρ = 1.5/√3; τ_b = 2/√6
    rho, tau = ag.rank_correlation({"a": 0.2, "b": 0.4, "c": 0.9}, {"a": 0.5, "b": 0.5, "c": 1.0})
    assert rho == pytest.approx(math.sqrt(3) / 2)
    assert tau == pytest.approx(2 / math.sqrt(6))


def test_rank_correlation_edges():
    assert ag.rank_correlation({"a": 1, "b": 2, "c": 3}, {"a": 3, "b": 2, "c": 1}) == pytest.approx((-1.0, -1.0))
    assert ag.rank_correlation({"a": 1}, {"a": 1}) == (None, None)  # one agent
    assert ag.rank_correlation({"a": 1, "b": 1}, {"a": 1, "b": 2}) == (None, None)  # constant judge
    assert ag.rank_correlation({"a": 1, "b": 2, "c": 5, "x": 9}, {"a": 1, "b": 2, "c": 3, "y": 0}) == pytest.approx((1, 1))
    # two shared agents always rank ±1: undefined, not a perfect correlation
    assert ag.rank_correlation({"a": 1, "b": 2, "x": 9}, {"a": 1, "b": 2, "y": 0}) == (None, None)
    assert ag.rank_correlation({"a": 2, "b": 1}, {"a": 1, "b": 2}) == (None, None)


def test_single_run_metrics():
    m = ag.item_metrics(items([(T, [T]), (F, [T]), (F, [F])]))
    assert m["n_runs"] == 1 and m["self_consistency"] is None
    assert m["accuracy_mean"] == m["majority_accuracy"] == pytest.approx(2 / 3)
    assert m["auroc"] is m["ece"] is m["best_threshold"] is m["best_threshold_accuracy"] is None  # no p_true


# -- on the fixture files (hand-computed in the comments) ---------------------------------
def test_fixture_metrics_by_hand(agree_records):
    res = ag.agreement(agree_records["tasks"], agree_records["judgments"], label_index(agree_records["labels"]))
    assert list(res) == ["gen-b", "choice-a", "const"]  # sorted by mean accuracy
    a = res["choice-a"]  # 3 runs; flips: run 0 one, run 1 one, run 2 two (of 15)
    assert a["accuracy_mean"] == pytest.approx(41 / 45)
    assert a["self_consistency"] == pytest.approx(12 / 15)
    assert a["majority_accuracy"] == pytest.approx(14 / 15)
    assert a["kappa"] == pytest.approx(840 / 1020)  # pooled: TT 21, FT 4, FF 20
    assert a["ece"] == pytest.approx((21 * 0.1 + 20 * 0.1 + 4 * 0.6) / 45)
    assert a["auroc"] == 1.0 and a["best_threshold"] == 0.9 and a["best_threshold_accuracy"] == 1.0
    assert (a["n"], a["n_runs"], a["ungraded"]) == (15, 3, 0)
    b = res["gen-b"]  # run 0: one ungraded; run 1: one flip; tie [T, F] → first run's T
    assert b["accuracy_mean"] == pytest.approx(14 / 15)
    assert b["self_consistency"] == pytest.approx(13 / 15)
    assert b["majority_accuracy"] == 1.0
    assert b["kappa"] == pytest.approx(388 / 448)
    assert b["ungraded"] == 1 and b["auroc"] is None and b["ece"] is None
    assert b["confusion"]["counts"] == [[13, 1, 0], [0, 15, 1]]
    c = res["const"]  # always true: accuracy = share of true labels
    assert c["accuracy_mean"] == pytest.approx(7 / 15) and c["kappa"] == 0.0
    assert c["rank_spearman"] is None and c["rank_kendall"] is None  # constant scores
    assert a["rank_spearman"] == pytest.approx(1.0) and b["rank_kendall"] == pytest.approx(1.0)


def test_fixture_breakdowns(agree_records):
    res = ag.agreement(agree_records["tasks"], agree_records["judgments"], label_index(agree_records["labels"]))
    by = res["const"]["by"]
    assert set(by) == set(ag.BREAKDOWNS)
    assert {k: v["n"] for k, v in by["language"].items()} == {"en": 9, "zh": 6}
    assert by["language"]["zh"]["accuracy_mean"] == pytest.approx(1 / 6)  # only alpha t2 r1 is true
    assert by["type"]["Subjective"]["accuracy_mean"] == 1.0  # r3 of t1 is true for every agent
    assert by["priority"]["Nice to Have"]["n"] == 3
    assert set(by["language"]["en"]) == set(ag.METRIC_KEYS)


def test_ranking_swapped_agents_by_hand(agree_records):
    lab = label_index(agree_records["labels"])
    swap = {"beta": "gamma", "gamma": "beta", "alpha": "alpha"}
    js = [
        Judgment(task_id=k[0], agent=swap[k[1]], run=k[2], rubric_id=k[3], judge="swap", satisfied=v)
        for k, v in lab.items()
    ]
    # label scores alpha .75 > beta .375 > gamma .125; the judge swaps beta and gamma
    m = ag.judge_agreement(agree_records["tasks"], js, lab)
    assert m["rank_spearman"] == pytest.approx(0.5)  # 1 − 6·2 / (3·8)
    assert m["rank_kendall"] == pytest.approx(1 / 3)  # (2 concordant − 1 discordant) / 3


def test_labels_without_judgments_error(agree_records):
    lab = label_index(agree_records["labels"])
    lab[("t1", "delta", 0, "r1")] = True
    with pytest.raises(LifesearchError, match=r"no judgment by judge 'choice-a'.*agent delta"):
        ag.agreement(agree_records["tasks"], agree_records["judgments"], lab)
    partial = [j for j in agree_records["judgments"] if not (j.judge == "choice-a" and j.judge_run == 2 and j.agent == "beta")]
    with pytest.raises(LifesearchError, match=r"5 labelled rubric decision\(s\).*judge run 2"):
        ag.agreement(agree_records["tasks"], partial, label_index(agree_records["labels"]))
