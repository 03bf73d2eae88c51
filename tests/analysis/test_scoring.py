"""Scores on hand-computed cases (paper eq. 1), aggregation over runs, agents and judges."""

from __future__ import annotations

import math

import pytest

from lifesearch_local.analysis.scoring import mean_std, score_agents, score_by_judge, task_score
from lifesearch_local.errors import IncompleteRunError, LifesearchError
from lifesearch_local.records import Judgment, Report, Rubric
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from tests.helpers.inputs import FIXTURES

TASKS = FIXTURES / "score" / "tasks.jsonl"
JUDG = FIXTURES / "score" / "judgments.jsonl"


def rub(rid, w):
    return Rubric(id=rid, criterion="c", type="Objective", necessity="Explicit", priority="Must Have", weight=w)


def test_task_score_weights_tenths():
    rubrics = [rub(f"R{i}", i / 10) for i in range(1, 11)]
    got = {"R2": True, "R5": True, "R10": True, "R3": False, "R4": None}
    # (0.2 + 0.5 + 1.0) / (0.1 + … + 1.0) = 1.7 / 5.5
    assert task_score(rubrics, got) == pytest.approx(1.7 / 5.5, abs=1e-12)


def test_zero_weight_rubrics_are_omitted():
    rubrics = [rub("R1", 0.4), rub("R2", 0.0), rub("R3", 0.6)]
    assert task_score(rubrics, {"R1": True, "R2": True, "R3": False}) == pytest.approx(0.4)
    assert task_score(rubrics, {"R1": False, "R2": True, "R3": False}) == 0.0


def test_mean_and_sample_std():
    m, s = mean_std([0.5, 0.7, 0.9])
    assert m == pytest.approx(0.7) and s == pytest.approx(0.2)  # sample std, n - 1
    assert mean_std([0.3]) == (0.3, None)


def test_several_runs_agents_ungraded():
    rows = score_agents(load_tasks(TASKS), read_records(JUDG, Judgment))
    alpha, beta = rows["alpha"], rows["beta"]
    # alpha: t1 runs = 1.7/5.5, 1, 0 ; t2 runs = 1/2, 1.5/2, 2/2
    runs = [(1.7 / 5.5 + 0.5) / 2, (1 + 0.75) / 2, (0 + 1) / 2]
    assert [alpha.runs[r] for r in range(3)] == pytest.approx(runs)
    assert alpha.overall_mean == pytest.approx(sum(runs) / 3)
    mu = sum(runs) / 3
    assert alpha.overall_std == pytest.approx(math.sqrt(sum((x - mu) ** 2 for x in runs) / 2))
    assert alpha.domains == pytest.approx({"company": (1.7 / 5.5 + 1 + 0) / 3, "policy": 0.75})
    assert alpha.tasks == pytest.approx({"t1": (1.7 / 5.5 + 1) / 3, "t2": 0.75})
    # beta: t1 = (0.6+…+1.0)/5.5 = 4/5.5 ; t2: R1 ungraded → (0.5 + 0.5)/2
    assert beta.overall_mean == pytest.approx((4 / 5.5 + 0.5) / 2)
    assert beta.overall_std is None and beta.ungraded == 1 and alpha.ungraded == 0
    assert list(rows) == ["beta", "alpha"]  # sorted by score


def test_missing_is_an_error_unless_allowed():
    tasks = load_tasks(TASKS)
    js = [j for j in read_records(JUDG, Judgment) if not (j.agent == "beta" and j.rubric_id == "R10")]
    with pytest.raises(IncompleteRunError, match=r"1 rubric\(s\) have no judgment \(first: agent 'beta', run 0, "
                       r"task t1, rubric R10\); 1 of 2 tasks were judged in full; score only those: --task-ids t2; "
                       r"--allow-missing instead counts every unjudged rubric as not satisfied") as e:
        score_agents(tasks, js)
    assert e.value.complete == ["t2"]
    beta = score_agents(tasks, js, allow_missing=True)["beta"]
    assert beta.missing == 1 and beta.ungraded == 1
    assert beta.overall_mean == pytest.approx((3 / 5.5 + 0.5) / 2)  # missing counts as not satisfied


def test_a_task_without_any_judgment_is_missing():
    tasks = load_tasks(TASKS)
    js = [j for j in read_records(JUDG, Judgment) if not (j.agent == "beta" and j.task_id == "t2")]
    with pytest.raises(IncompleteRunError, match="3 rubric"):
        score_agents(tasks, js)


def test_unknown_ids_and_conflicts_are_errors():
    tasks = load_tasks(TASKS)
    base = dict(agent="a", run=0, judge="j", satisfied=True)
    with pytest.raises(LifesearchError, match="unknown task 'zz'"):
        score_agents(tasks, [Judgment(task_id="zz", rubric_id="R1", **base)])
    with pytest.raises(LifesearchError, match="unknown rubric 'R99'"):
        score_agents(tasks, [Judgment(task_id="t1", rubric_id="R99", **base)])
    j1 = Judgment(task_id="t1", rubric_id="R1", **base)
    j2 = j1.model_copy(update={"satisfied": False})
    with pytest.raises(LifesearchError, match="conflicting"):
        score_agents(tasks, [j1, j2], allow_missing=True)


def test_scored_per_judge_and_judge_filter():
    tasks = load_tasks(TASKS)
    js = read_records(JUDG, Judgment)
    flipped = [j.model_copy(update={"judge": "j2", "satisfied": True}) for j in js]
    by = score_by_judge(tasks, js + flipped)
    assert set(by) == {"j1", "j2"}
    assert by["j2"]["alpha"].overall_mean == 1.0 and by["j2"]["alpha"].overall_std == 0.0
    assert set(score_by_judge(tasks, js + flipped, judge="j2")) == {"j2"}
    with pytest.raises(LifesearchError, match="no judgments by judge 'j3'"):
        score_by_judge(tasks, js, judge="j3")


def test_resources_from_reports():
    tasks = load_tasks(TASKS)
    reps = [Report(task_id="t1", agent="beta", text="x", iterations=10, output_tokens=2000),
            Report(task_id="t2", agent="beta", text="y", iterations=20, output_tokens=4000)]
    beta = score_agents(tasks, read_records(JUDG, Judgment), reports=reps)["beta"]
    assert beta.iterations == 15 and beta.output_tokens == 3000
    assert beta.tool_calls is None and beta.pages_read is None  # reports that do not say
    reps = [r.model_copy(update={"tool_calls": n, "pages_read": n // 2}) for r, n in zip(reps, (4, 0))]
    beta = score_agents(tasks, read_records(JUDG, Judgment), reports=reps)["beta"]
    assert (beta.tool_calls, beta.pages_read) == (2, 1) and beta.as_json()["tool_calls"] == 2
