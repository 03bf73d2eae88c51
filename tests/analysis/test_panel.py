"""Panel judges: the rules on hand-made votes, and by simulation the accuracy a majority of three gains."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lifesearch_local.analysis.agreement import ece
from lifesearch_local.analysis.panel import combine, error_agreement, member_judgments, panel_judgments
from lifesearch_local.errors import LifesearchError
from lifesearch_local.records import Judgment


def vote(judge: str, satisfied: bool | None, p: float | None = None, rubric: str = "R1", **kw) -> Judgment:
    return Judgment(task_id="t", agent="a", rubric_id=rubric, judge=judge, satisfied=satisfied, p_true=p, **kw)


def test_majority_is_the_verdict_most_members_gave():
    assert combine([vote("a", True, 0.9), vote("b", True, 0.6), vote("c", False, 0.01)], "majority") == \
        (True, pytest.approx(2 / 3), False)  # p_true: the share of yes votes; the mean p_true (0.50) does not overrule


def test_an_even_split_is_decided_by_the_mean_p_true():
    # four members two against two: the confident no outweighs the lukewarm yeses
    verdict, p, tie = combine([vote("a", True, 0.55), vote("b", True, 0.6), vote("c", False, 0.1), vote("d", False, 0.3)],
                              "majority")
    assert (verdict, tie) == (False, True) and p == pytest.approx(0.5)  # two of four said yes
    # an ungraded member leaves one vote each: the mean p_true of the graded two decides
    verdict, p, tie = combine([vote("a", True, 0.9), vote("b", False, 0.2), vote("c", None)], "majority")
    assert (verdict, tie) == (True, True) and p == pytest.approx(0.5)


def test_a_split_without_p_true_and_a_panel_of_ungraded_members_are_ungraded():
    assert combine([vote("a", True), vote("b", False)], "majority") == (None, 0.5, False)
    assert combine([vote("a", None), vote("b", None), vote("c", None)], "majority") == (None, None, False)
    assert combine([vote("a", None), vote("b", None)], "mean") == (None, None, False)


def test_mean_rule_averages_p_true_and_counts_a_verdict_without_one_as_1_or_0():
    # majority would say true (two of three); the mean p_true is 0.4: not satisfied
    assert combine([vote("a", True, 0.55), vote("b", True, 0.55), vote("c", False, 0.1)], "mean")[0] is False
    assert combine([vote("a", True, 0.55), vote("b", True, 0.55), vote("c", False, 0.1)], "majority")[0] is True
    # generate-mode members: (1 + 1 + 0) / 3 ≥ 0.5
    assert combine([vote("a", True), vote("b", True), vote("c", False)], "mean")[:2] == (True, pytest.approx(2 / 3))


def test_panel_records_name_members_votes_rule_and_keep_the_shared_rubric_hash():
    js = [vote("a", True, 0.8, rubric_hash="h1"), vote("b", False, 0.3, rubric_hash="h1"),
          vote("c", True, 0.7, rubric_hash="h1", judge_run=0)]
    (p,) = panel_judgments(js, ["a", "b", "c"], "majority", "panel")
    assert p.judge == "panel" and p.satisfied is True and p.p_true == pytest.approx(2 / 3)
    assert p.panel.members == ["a", "b", "c"] and p.panel.votes == [True, False, True] and p.panel.combine == "majority"
    assert p.rubric_hash == "h1" and p.settings and p.reason is None
    # another rule or another member set is another panel: its settings hash differs
    (q,) = panel_judgments(js, ["a", "b", "c"], "mean", "panel")
    assert q.settings != p.settings


def test_a_members_repetition_is_named_id_hash_k():
    js = [vote("a", True, 0.8), vote("a", False, 0.2, judge_run=1), vote("b", False, 0.3)]
    (p,) = panel_judgments(js, ["a#1", "b"], "majority", "panel")
    assert p.panel.votes == [False, False] and p.satisfied is False


@pytest.mark.parametrize(("members", "js", "message"), [
    (["a"], [vote("a", True)], "two or more distinct members"),
    (["a", "a"], [vote("a", True)], "two or more distinct members"),
    (["a", "x"], [vote("a", True), vote("b", True)], "no judgments by panel member(s) x"),
    (["a", "b"], [vote("a", True), vote("b", True), vote("b", True, rubric="R2")], "did not decide the same rubrics"),
    (["a", "b"], [vote("a", True, rubric_hash="h1"), vote("b", True, rubric_hash="h2")], "different versions"),
    (["a", "b"], [vote("a", True), vote("b", True), vote("panel", True)], "already a judge"),
])
def test_refused_panels(members, js, message):
    with pytest.raises(LifesearchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        panel_judgments(js, members, "majority", "panel")


def _simulated(n: int, accuracy: float, members: int, seed: int) -> tuple[list[Judgment], np.ndarray]:
    """`members` independent judges, each right with probability `accuracy` on `n` decisions
    whose truth is a fair coin; their judgments and the truth."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n) < 0.5
    js = []
    for m in range(members):
        right = rng.random(n) < accuracy
        said = np.where(right, truth, ~truth)
        js += [Judgment(task_id=f"t{i // 50}", agent="a", rubric_id=f"R{i % 50}", judge=f"j{m}", satisfied=bool(s))
               for i, s in enumerate(said)]
    return js, truth


def test_three_independent_judges_at_075_make_a_majority_panel_near_084():
    # P(at least 2 of 3 right) = 0.75³ + 3·0.75²·0.25 = 0.84375. With n decisions the panel's
    # accuracy has standard error sqrt(p(1−p)/n) = 0.0026 at n = 20,000; 4 SE (0.010) fails a
    # correct panel once in ~16,000 seeds, and catches a panel that followed one member (0.75,
    # 36 SE away) or got the rule backwards (0.15625) by far.
    n, p = 20_000, 0.75**3 + 3 * 0.75**2 * 0.25
    js, truth = _simulated(n, 0.75, 3, seed=20240934)
    panel = panel_judgments(js, ["j0", "j1", "j2"], "majority", "panel")
    got = np.array([j.satisfied for j in panel])
    member0 = np.array([j.satisfied for j in js[:n]])
    se = math.sqrt(p * (1 - p) / n)
    assert abs((got == truth).mean() - p) < 4 * se
    assert abs((member0 == truth).mean() - 0.75) < 4 * math.sqrt(0.75 * 0.25 / n)  # the members are as simulated


def _calibrated_members(n: int, shared: float, seed: int) -> tuple[list[Judgment], np.ndarray]:
    """Three members, each 75% accurate with a calibrated p_true (a noisy signal s = ±0.674 + noise,
    p = sigmoid(2·0.674·s)); `shared` is the share of the noise variance the three have in common."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n) < 0.5
    noise = math.sqrt(shared) * rng.standard_normal((n, 1)) + math.sqrt(1 - shared) * rng.standard_normal((n, 3))
    p = 1 / (1 + np.exp(-2 * 0.674 * (np.where(truth, 0.674, -0.674)[:, None] + noise)))
    js = [Judgment(task_id=f"t{i}", agent="a", rubric_id="R1", judge=f"j{m}", satisfied=bool(p[i, m] >= 0.5),
                   p_true=float(p[i, m])) for m in range(3) for i in range(n)]
    return js, truth


def test_the_majority_panel_p_true_is_calibrated_where_the_mean_is_not():
    """ECE over 20,000 decisions (its sampling error is about 0.005): a calibrated member ≈ 0.005, the share
    of yes votes ≈ 0.06 (three votes can only say 0, ⅓, ⅔, 1), the old mean of the members' p_true ≈ 0.19."""
    js, truth = _calibrated_members(20_000, 0.0, seed=5)
    panel = panel_judgments(js, ["j0", "j1", "j2"], "majority", "panel")
    labels = list(truth)
    got = ece(labels, [j.p_true for j in panel])
    mean_p = [float(np.mean([js[m * 20_000 + i].p_true for m in range(3)])) for i in range(20_000)]
    assert got < 0.08 and ece(labels, mean_p) > 0.15


def test_correlated_member_errors_are_flagged():
    for shared, flagged in ((0.0, False), (0.6, True)):
        js, truth = _calibrated_members(3000, shared, seed=6)
        members = ["j0", "j1", "j2"]
        votes = [member_judgments(js, m) for m in members]
        labels = {(f"t{i}", "a", 0, "R1"): bool(y) for i, y in enumerate(truth)}
        rows = error_agreement(votes, members, labels)
        assert len(rows) == 3 and all(r["n"] == 3000 for r in rows)
        assert all(r["correlated"] is flagged for r in rows), (shared, [r["kappa"] for r in rows])
