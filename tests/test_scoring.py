"""Scores on hand-computed cases (paper eq. 1), aggregation over runs, agents and judges."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from conftest import FIXTURES

from lifesearch_local.analysis.scoring import mean_std, score_agents, score_by_judge, task_score
from lifesearch_local.errors import IncompleteRunError, LifesearchError
from lifesearch_local.records import Judgment, Report, Rubric
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks

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
    with pytest.raises(IncompleteRunError, match=r"1 rubric\(s\) of agent 'beta'.*task t1, rubric R10"):
        score_agents(tasks, js)
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


def cli(*args):
    return subprocess.run([sys.executable, "-m", "lifesearch_local", *args], capture_output=True, text=True)


def test_cli_score_json_and_table():
    r = cli("score", "--tasks", str(TASKS), "--judgments", str(JUDG), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["judge"] == "j1"
    alpha = out["agents"]["alpha"]
    assert set(alpha) >= {"overall_mean", "overall_std", "runs", "domains", "tasks", "ungraded"}
    assert len(alpha["runs"]) == 3 and out["agents"]["beta"]["ungraded"] == 1
    assert 0 <= alpha["overall_mean"] <= 1
    r = cli("score", "--tasks", str(TASKS), "--judgments", str(JUDG))
    assert r.returncode == 0 and "59.32 ± 24.87" in r.stdout and "1 ungraded" in r.stdout


def test_cli_score_limit_scores_only_the_first_tasks(tmp_path):
    """After `judge --limit 1` only the first task has judgments: the full file is incomplete,
    --limit 1 scores that task alone: R1 (w 0.5) passed, R2 (w 1.0) failed, so 0.5 / 1.5."""
    tasks = tmp_path / "tasks.jsonl"
    rub = [{"id": "R1", "criterion": "a", "type": "Objective", "necessity": "Explicit", "priority": "Must Have",
            "weight": 0.5},
           {"id": "R2", "criterion": "b", "type": "Objective", "necessity": "Explicit", "priority": "Must Have",
            "weight": 1.0}]
    tasks.write_text("".join(json.dumps({"id": t, "language": "en", "domain": "company", "question": "q",
                                         "rubrics": rub}) + "\n" for t in ("first", "second")))
    judg = tmp_path / "judgments.jsonl"
    judg.write_text("".join(json.dumps({"task_id": "first", "agent": "a", "rubric_id": r, "judge": "j",
                                        "satisfied": ok}) + "\n" for r, ok in (("R1", True), ("R2", False))))
    r = cli("score", "--tasks", str(tasks), "--judgments", str(judg), "--json")
    assert r.returncode == 2 and "no judgment" in r.stderr
    r = cli("score", "--tasks", str(tasks), "--judgments", str(judg), "--json", "--limit", "1")
    assert r.returncode == 0, r.stderr
    assert math.isclose(json.loads(r.stdout)["agents"]["a"]["overall_mean"], 0.5 / 1.5)
    assert "scoring the first 1 tasks" in r.stderr
    assert cli("score", "--tasks", str(tasks), "--judgments", str(judg), "--limit", "0").returncode == 2


def test_cli_validate_and_errors(tmp_path):
    r = cli("validate", str(TASKS))
    assert r.returncode == 0 and "2 tasks, 14 rubrics" in r.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text(TASKS.read_text().replace('"domain": "policy"', '"domain": "cooking"'))
    r = cli("validate", str(bad))
    assert r.returncode == 2 and f"{bad}:2: domain: unknown domain 'cooking'" in r.stderr
    partial = tmp_path / "j.jsonl"
    partial.write_text("".join(JUDG.read_text().splitlines(keepends=True)[:-1]))
    r = cli("score", "--tasks", str(TASKS), "--judgments", str(partial))
    assert r.returncode == 2 and "incomplete run" in r.stderr
    r = cli("score", "--tasks", str(TASKS), "--judgments", str(partial), "--allow-missing", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["agents"]["beta"]["missing"] == 1
