"""The certify study on synthetic data with a known truth: shifts, Bias Index, τ, flips, categories, non-inferiority, verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from lifesearch_local.analysis import resampling as stats
from lifesearch_local.analysis.agreement import collect_items
from lifesearch_local.analysis.agreement_ci import judge_ci, rank_ci
from lifesearch_local.analysis.certify import (
    category_of,
    certify,
    compare_fingerprints,
    decide,
    non_inferiority,
    shifts,
    task_matrices,
)
from lifesearch_local.analysis.labels import label_index
from lifesearch_local.errors import LifesearchError
from lifesearch_local.records import JudgeIdentity, Judgment, Label, Task
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from tests.helpers.inputs import AGREE, rubric, task

B = 2000
N_TASKS = 8  # 8 tasks: a constant paired difference has exact sign-flip p = 2/2^8, significant after Holm
SETTINGS = {"category_field": "type", "margin": 2.0}  # certify's own defaults live in run.config.CertifySettings


def tasks_(n: int = N_TASKS) -> list[Task]:
    return [Task.model_validate(task(f"t{i}", [rubric("R1", 1.0), rubric("R2", 1.0, type="Subjective")]))
            for i in range(n)]


def decisions(rule) -> dict:
    """key → decision for agents A, B, C on every task's R1 and R2, by rule(agent, task index, rubric)."""
    return {(f"t{i}", a, 0, r): rule(a, i, r) for i in range(N_TASKS) for a in "ABC" for r in ("R1", "R2")}


# The reference: A satisfies everything (100), B only R1 (50), C nothing (0).
REF = decisions(lambda a, i, r: a == "A" or (a == "B" and r == "R1"))
# The judge: A as the reference (shift 0), B everything (100: +50), C everything on the first two tasks only
# (25: +25, per task +100, +100, 0, …, 0).
JUDGE = decisions(lambda a, i, r: a in "AB" or (a == "C" and i < 2))


def items_of(judge: dict, labels: dict, tasks=None):
    js = [Judgment(task_id=k[0], agent=k[1], run=k[2], rubric_id=k[3], judge="x", satisfied=v) for k, v in judge.items()]
    return collect_items(tasks or tasks_(), js, labels)[0]


@pytest.fixture(scope="module")
def study():
    return certify(tasks_(), items_of(JUDGE, REF), n_resamples=B, names=("x", "ref"), **SETTINGS)


def test_shifts_and_bias_index_are_exact_on_a_hand_computed_case(study):
    a = study["agents"]
    assert {k: v["shift"] for k, v in a.items()} == pytest.approx({"A": 0.0, "B": 50.0, "C": 25.0})
    assert {k: v["reference_score"] for k, v in a.items()} == pytest.approx({"A": 100.0, "B": 50.0, "C": 0.0})
    assert {k: v["judge_score"] for k, v in a.items()} == pytest.approx({"A": 100.0, "B": 100.0, "C": 25.0})
    # A's and B's shifts are the same on every task: no spread, so no (zero-width) interval
    assert a["A"]["ci95"] is None and a["B"]["ci95"] is None
    lo, hi = a["C"]["ci95"]  # C's per-task shifts are 100, 100, 0, 0, 0, 0, 0, 0
    assert 0 <= lo < 25 < hi <= 100
    assert study["bias_index"]["value"] == pytest.approx(50.0)  # max − min = 50 − 0


def test_the_bias_index_interval_bootstraps_the_statistic_itself():
    agents, _, x, r = task_matrices(tasks_(), items_of(JUDGE, REF))
    got = shifts(agents, x, r, n_resamples=B, seed=5)["bias_index"]["ci95"]
    counts = stats.resample_counts(N_TASKS, B, stats.rng_for(5, 1))
    d = 100 * ((counts @ x) - (counts @ r)) / N_TASKS  # every agent has every task here
    brute = d.max(axis=1) - d.min(axis=1)  # max − min on each resample, not from the agents' intervals
    assert got == pytest.approx(list(stats.percentile_ci(brute, n_units=N_TASKS)[0]))
    assert got[0] == pytest.approx(50) and got[1] > 50  # at least B − A; more when C draws its two tasks often


def test_ranking_tau_and_the_flip_that_holds_under_the_reference(study):
    rk = study["ranking"]
    # judge 100, 100, 25 vs reference 100, 50, 0: pairs (A,B) tie vs order → 0, (A,C) and (B,C) concordant
    assert rk["kendall_tau"] == pytest.approx(2 / np.sqrt(2 * 3))
    (flip,) = rk["flips"]
    assert (flip["a"], flip["b"]) == ("A", "B") and flip["reference_diff"] == pytest.approx(50.0)
    assert flip["judge_diff"] == 0.0
    assert flip["significant_under_reference"] is True  # 8 tasks, all +50: exact p = 2/256, Holm ≤ 3·p


def test_a_flip_on_few_tasks_is_not_significant():
    tasks = tasks_(4)
    keep = lambda d: {k: v for k, v in d.items() if int(k[0][1:]) < 4}  # noqa: E731
    out = certify(tasks, items_of(keep(JUDGE), keep(REF), tasks), n_resamples=B, **SETTINGS)
    (flip,) = out["ranking"]["flips"]
    assert flip["significant_under_reference"] is False  # 4 tasks: exact p = 2/16 = 0.125


def test_categories_by_rubric_type(study):
    c = study["categories"]
    assert set(c) == {"Objective", "Subjective"} and study["category_field"] == "type"
    # Objective (R1): the judge differs only on C's first two tasks: 22 of 24 right
    assert c["Objective"]["accuracy"] == pytest.approx(22 / 24) and c["Objective"]["n"] == 24
    assert {a: v["shift"] for a, v in c["Objective"]["shift"].items()} == pytest.approx({"A": 0, "B": 0, "C": 25})
    # Subjective (R2): the judge says B satisfies it on every task, and C on two: 14 of 24
    assert c["Subjective"]["accuracy"] == pytest.approx(14 / 24)
    assert {a: v["shift"] for a, v in c["Subjective"]["shift"].items()} == pytest.approx({"A": 0, "B": 100, "C": 25})
    top = c["Subjective"]["most_disagreed"]  # t0 and t1's R2 (B and C wrong) first, then the others by task
    assert [(r["task_id"], r["disagreements"], r["n"]) for r in top] == [
        ("t0", 2, 3), ("t1", 2, 3), ("t2", 1, 3), ("t3", 1, 3), ("t4", 1, 3)]
    assert top[0]["rubric_id"] == "R2" and top[0]["criterion"] == "The response should state R2."


def test_category_fields_and_an_unknown_one():
    ts = [Task.model_validate(task("t0", [rubric("R1", 1.0, dimension="analysis"), rubric("R2", 1.0)], domain="policy"))]
    assert category_of(ts, "dimension") == {("t0", "R1"): "analysis", ("t0", "R2"): "(none)"}
    assert category_of(ts, "domain") == {("t0", "R1"): "policy", ("t0", "R2"): "policy"}
    with pytest.raises(LifesearchError, match="unknown category field"):
        category_of(ts, "colour")


def test_agreement_and_tau_intervals_are_agree_s(study):
    # same fixture, same seed: certify's intervals are the ones `agree` prints for the judge
    tasks = load_tasks(AGREE / "tasks.jsonl")
    ref = label_index(read_records(AGREE / "labels.jsonl", Label))
    js = [j for j in read_records(AGREE / "judgments.jsonl", Judgment) if j.judge == "choice-a"]
    items, _ = collect_items(tasks, js, ref)
    out = certify(tasks, items, n_resamples=B, **SETTINGS)
    ci = judge_ci(items, n_resamples=B)
    assert out["agreement"]["ci95"] == {"accuracy": ci["accuracy_mean"], "kappa": ci["kappa"]}
    # τ's interval: the fixture's two tasks give τ = 1 on every resample (no interval); 20 random tasks, 4 agents
    rng = np.random.default_rng(0)
    ts = [Task.model_validate(task(f"t{i}", [rubric(f"R{k}", 1.0) for k in range(4)])) for i in range(20)]
    ref = {(f"t{i}", a, 0, f"R{k}"): bool(rng.random() < q) for i in range(20) for a, q in zip("ABCD", (.8, .6, .5, .3))
           for k in range(4)}  # fmt: skip
    synthetic = items_of({k: v ^ bool(rng.random() < 0.25) for k, v in ref.items()}, ref, ts)
    tau = rank_ci(ts, synthetic, n_resamples=B)["rank_kendall"]
    assert certify(ts, synthetic, n_resamples=B, **SETTINGS)["ranking"]["ci95"] == tau and tau[0] < tau[1]


# -- non-inferiority ---------------------------------------------------------------------------------
def ni_case(seed: int, n_reports: int, judge_err: float, ref_err: float):
    """Human labels on n_reports reports × 5 rubrics; the judge and the reference err independently."""
    rng = np.random.default_rng(seed)
    ts = [Task.model_validate(task(f"t{i}", [rubric(f"R{k}", 1.0) for k in range(5)])) for i in range(n_reports)]
    human = {(f"t{i}", "A", 0, f"R{k}"): bool(rng.random() < 0.5) for i in range(n_reports) for k in range(5)}
    judge = {k: v ^ bool(rng.random() < judge_err) for k, v in human.items()}
    ref = {k: v ^ bool(rng.random() < ref_err) for k, v in human.items()}
    return items_of(judge, human, ts), ref


@pytest.mark.parametrize(("judge_err", "ref_err", "verdict"), [
    (0.10, 0.10, "non-inferior"),  # equal accuracy, 2,000 decisions: the interval sits above −2
    (0.30, 0.10, "inferior"),  # 20 points worse: the interval sits below −2
    (0.12, 0.10, "inconclusive"),  # 2 points worse: the interval straddles −2
])
def test_non_inferiority_verdicts(judge_err, ref_err, verdict):
    items, ref = ni_case(11, 400, judge_err, ref_err)
    ni = non_inferiority(items, ref, 2.0, n_resamples=B, seed=1)
    assert ni["verdict"] == verdict, ni
    lo, hi = ni["ci95"]
    assert (lo > -2) == (verdict == "non-inferior") and (hi < -2) == (verdict == "inferior")
    assert ni["diff"] == pytest.approx(100 * (ni["judge_accuracy"] - ni["reference_accuracy"]))


def test_non_inferiority_counts_human_labels_the_reference_lacks():
    items, ref = ni_case(3, 20, 0.1, 0.1)
    del ref[items[0].key]
    ni = non_inferiority(items, ref, 2.0, n_resamples=200, seed=1)
    assert ni["human_without_reference"] == 1 and ni["n"] == len(items) - 1
    with pytest.raises(LifesearchError, match="no verdict on any human-labelled"):
        non_inferiority(items, {}, 2.0, n_resamples=200, seed=1)


# -- the verdict line -----------------------------------------------------------------------------------
def fake(shift_cis: dict, flips=(), ni=None) -> dict:
    return {"agents": {a: {"shift": (c[0] + c[1]) / 2 if c else 0.0, "ci95": c} for a, c in shift_cis.items()},
            "ranking": {"flips": list(flips)}, "bias_index": {"value": 1.0, "ci95": [0.2, 3.0]},
            **({"non_inferiority": ni} if ni else {})}


def test_the_verdict_without_human_labels():
    assert decide(fake({"A": [-1.5, 1.0], "B": [-0.5, 1.9]}), 2.0)[0] == "equivalent-scores"
    assert decide(fake({"A": [-1.5, 1.0], "B": [2.5, 6.0]}), 2.0)[0] == "different-scores"
    assert decide(fake({"A": [-1.5, 1.0], "B": [0.5, 3.0]}), 2.0)[0] == "inconclusive"
    flip = {"a": "A", "b": "B", "significant_under_reference": True}
    decision, line = decide(fake({"A": [-1.0, 1.0], "B": [-1.0, 1.0]}, [flip]), 2.0, "x", "gemini")
    assert decision == "different-scores" and "1 significant under gemini" in line
    assert "no human labels" in line  # it says what it rests on


def test_the_verdict_with_human_labels_is_the_non_inferiority_one():
    ni = {"verdict": "inferior", "n": 300, "diff": -6.0, "ci95": [-9.0, -3.0]}
    decision, line = decide(fake({"A": [-1.0, 1.0]}, ni=ni), 2.0, "x", "gemini")
    assert decision == "inferior" and line.startswith("keep gemini") and "300 human-labelled" in line


def test_fingerprints_compared():
    fp = JudgeIdentity(judge="x", engine="hf", weights_hash="aa", kernel_form="shared")
    same = compare_fingerprints(fp, fp.model_copy(update={"judge": "y"}))
    assert same["differences"] == [] and "same judge" in same["note"]
    other = compare_fingerprints(fp, fp.model_copy(update={"weights_hash": "bb"}))
    assert other["differences"] == ["weights_hash: 'aa' != 'bb'"] and "two judges" in other["note"]
    assert "not compared" in compare_fingerprints(fp, None)["note"]
    two = compare_fingerprints(fp, JudgeIdentity(judge="y", engine="vllm", weights_hash="aa", kernel_form="shared"))
    assert two["note"] == "two different judges (their fingerprints differ in engine)"
