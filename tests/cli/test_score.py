"""`lifesearch score`: JSON, table and CSV with intervals and comparisons, --limit, incomplete runs."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from lifesearch_local.analysis import resampling as stats
from lifesearch_local.analysis.scoring import score_by_judge
from lifesearch_local.records import Judgment
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from tests.helpers.cli import cli_out
from tests.helpers.inputs import AGREE, FIXTURES

TASKS = FIXTURES / "score" / "tasks.jsonl"
JUDG = FIXTURES / "score" / "judgments.jsonl"


def test_score_json_carries_intervals_and_comparisons(capsys):
    argv = ("score", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl"),
            "--judge", "choice-a#1", "--json", "--resamples", "2000")
    first, again = cli_out(capsys, *argv), cli_out(capsys, *argv)
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
    other = json.loads(cli_out(capsys, *argv, "--seed", "1"))
    assert other["bootstrap"]["seed"] == 1  # recorded (that the seed changes draws: test_same_input_same_output…)


def test_score_table_and_csv(capsys):
    import csv
    import io

    from lifesearch_local.output.csv_rows import SCORE_COLUMNS

    base = ("score", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl"),
            "--judge", "choice-a#1", "--resamples", "500")
    table = cli_out(capsys, *base, "--compare")
    assert "Mean [95% CI]" in table and "68.8 [" in table and "none of the 3 differences holds" in table
    assert "Paired comparisons" in table and "cannot tell apart" in table and "not shown" not in table
    rows = list(csv.DictReader(io.StringIO(cli_out(capsys, *base, "--csv"))))
    assert tuple(rows[0]) == SCORE_COLUMNS
    overall = {r["agent"]: r for r in rows if r["metric"] == "overall"}
    assert set(overall) == {"alpha", "beta", "gamma"} and float(overall["alpha"]["value"]) == pytest.approx(0.6875)
    assert float(overall["alpha"]["ci_lo"]) <= 0.6875 <= float(overall["alpha"]["ci_hi"])
    assert [(r["agent"], r["other"]) for r in rows if r["metric"] == "diff"] == [
        ("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma")]


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


FORMULA_AGENT, FORMULA_JUDGE = "=cmd|' /C calc'!A0", "@SUM(1+1)*cmd"


def formula_inputs(tmp_path):
    """Task, agent and judge ids a spreadsheet would run as formulas (legal ids: no control character)."""
    from tests.helpers.inputs import J, rubric, task, write_jsonl

    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task("+t1", [rubric("R0", 0.5), rubric("-R1", 0.5)])])
    rows = [{**J, "task_id": "+t1", "agent": a, "judge": FORMULA_JUDGE, "rubric_id": r, "p_true": p, "satisfied": p > 0.5,
             "reason": "=1+1"}
            for a, p in ((FORMULA_AGENT, 0.2), ("-minus", 0.9)) for r in ("R0", "-R1")]
    return tasks, write_jsonl(tmp_path / "judgments.jsonl", rows)


def test_score_csv_neutralises_formula_cells(tmp_path, capsys):
    """`score --csv` wrote `=cmd|' /C calc'!A0` verbatim: every text cell that starts
    with = + - @ now starts with a quote, and the numbers (negative differences too) stay numbers."""
    import csv
    import io

    tasks, judgments = formula_inputs(tmp_path)
    rows = list(csv.DictReader(io.StringIO(cli_out(capsys, "score", "--tasks", str(tasks), "--judgments",
                                                   str(judgments), "--csv", "--resamples", "50"))))
    text = [v for r in rows for k, v in r.items() if k in ("judge", "agent", "other", "metric")]
    assert not [v for v in text if v and v[0] in "=+-@"], text
    assert {r["agent"] for r in rows} == {"'" + FORMULA_AGENT, "'-minus"} and {r["judge"] for r in rows} == {"'" + FORMULA_JUDGE}
    numbers = [r[k] for r in rows for k in ("value", "ci_lo", "ci_hi", "p_value", "n_tasks") if r[k]]
    assert numbers and all(isinstance(float(v), float) for v in numbers)  # not one got a quote


def test_cli_score_task_ids_score_those_tasks_as_a_tasks_file_of_them_would(tmp_path):
    """Found in use: no way to select tasks (a user filtered the JSONL by hand, and a grep missed)."""
    only_t2 = tmp_path / "t2.jsonl"
    only_t2.write_text(TASKS.read_text().splitlines(keepends=True)[1])
    by_hand = tmp_path / "j2.jsonl"
    by_hand.write_text("".join(line for line in JUDG.read_text().splitlines(keepends=True) if '"t2"' in line))
    want = cli("score", "--tasks", str(only_t2), "--judgments", str(by_hand), "--json")
    assert want.returncode == 0, want.stderr
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text("# the policy task\nt2\n\n")
    for how in (("--task-ids", "t2"), ("--task-ids-file", str(ids_file))):
        got = cli("score", "--tasks", str(TASKS), "--judgments", str(JUDG), "--json", *how)
        assert got.returncode == 0 and got.stdout == want.stdout, got.stderr
        assert "--task-ids: scoring 1 task(s)" in got.stderr
    both = cli("score", "--tasks", str(TASKS), "--judgments", str(JUDG), "--task-ids", "t1,t2", "--json")
    assert json.loads(both.stdout) == json.loads(cli("score", "--tasks", str(TASKS), "--judgments", str(JUDG), "--json").stdout)
    typo = cli("score", "--tasks", str(TASKS), "--judgments", str(JUDG), "--task-ids", "t2,t3")
    assert typo.returncode == 2 and f"error: --task-ids: 1 id(s) not in the tasks file {TASKS}: t3" in typo.stderr
    two_ways = cli("score", "--tasks", str(TASKS), "--judgments", str(JUDG), "--task-ids", "t2", "--limit", "1")
    assert two_ways.returncode == 2 and "pass one of them" in two_ways.stderr


def test_cli_score_judgments_of_tasks_the_tasks_file_lacks_name_that_file(tmp_path):
    only_t1 = tmp_path / "t1.jsonl"
    only_t1.write_text(TASKS.read_text().splitlines(keepends=True)[0])
    r = cli("score", "--tasks", str(only_t1), "--judgments", str(JUDG))
    assert r.returncode == 2
    assert f"error: 12 judgment(s) are for 1 task(s) not in the tasks file {only_t1}: t2; pass the tasks file" in r.stderr


def test_cli_score_shows_tool_calls_and_says_when_an_agent_did_no_research(tmp_path):
    """Found in use: the demo's agents made no tool call, yet one ranked first and nothing said so."""
    reports = tmp_path / "reports.jsonl"
    rows = [{"task_id": t, "agent": "alpha", "run": r, "text": "x", "tool_calls": 0, "pages_read": 0}
            for t in ("t1", "t2") for r in range(3)]
    rows += [{"task_id": t, "agent": "beta", "run": 0, "text": "y", "tool_calls": 6, "pages_read": 3} for t in ("t1", "t2")]
    reports.write_text("".join(json.dumps(row) + "\n" for row in rows))
    r = cli("score", "--tasks", str(TASKS), "--judgments", str(JUDG), "--reports", str(reports))
    assert r.returncode == 0, r.stderr
    assert "Tools" in r.stdout and "Pages" in r.stdout
    [warning] = [line for line in r.stdout.splitlines() if line.startswith("WARNING: no research")]
    assert "agent alpha made no tool call in any of its 6 report(s)" in warning and "not research" in warning
    out = json.loads(cli("score", "--tasks", str(TASKS), "--judgments", str(JUDG), "--reports", str(reports), "--json").stdout)
    assert (out["agents"]["alpha"]["tool_calls"], out["agents"]["beta"]["tool_calls"]) == (0, 6)
    assert out["agents"]["beta"]["pages_read"] == 3


def test_one_task_prints_no_zero_width_interval(capsys):
    """Found in review and in use: on one task `score --compare` printed `17.9 [17.9, 17.9]` and
    `+12.8 [+12.8, +12.8]`; below 2 tasks there is no interval, and every output says why."""
    import csv
    import io

    base = ("score", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl"),
            "--judge", "choice-a#2", "--limit", "1", "--resamples", "200")
    table = cli_out(capsys, *base, "--compare")
    assert "87.5 (n=1: no interval)" in table and "+12.5 (n=1: no interval)" in table
    assert "[87.5, 87.5]" not in table and "[+12.5, +12.5]" not in table
    out = json.loads(cli_out(capsys, *base, "--json"))
    alpha = out["agents"]["alpha"]
    assert alpha["ci95"] is None and alpha["ci95_reason"] == "n=1: no interval" and alpha["n_tasks"] == 1
    assert all(c["ci95"] is None and c["ci95_reason"] == "n=1: no interval" for c in out["comparisons"])
    rows = list(csv.DictReader(io.StringIO(cli_out(capsys, *base, "--csv"))))
    overall = next(r for r in rows if r["metric"] == "overall" and r["agent"] == "alpha")
    assert overall["ci_lo"] == overall["ci_hi"] == "" and overall["ci_reason"] == "n=1: no interval"


def test_domain_rows_carry_their_own_task_count(capsys, tmp_path):
    """Per-domain rows of `score --csv` / `--json` carried the overall n_tasks (3 for a one-task domain)."""
    import csv
    import io

    rub = [{"id": "R1", "criterion": "a", "type": "Objective", "necessity": "Explicit", "priority": "Must Have", "weight": 1}]
    tasks, judg = tmp_path / "tasks.jsonl", tmp_path / "judgments.jsonl"
    doms = {"t1": "company", "t2": "company", "t3": "policy"}
    tasks.write_text("".join(json.dumps({"id": t, "language": "en", "domain": d, "question": "q", "rubrics": rub}) + "\n"
                             for t, d in doms.items()))
    judg.write_text("".join(json.dumps({"task_id": t, "agent": a, "rubric_id": "R1", "judge": "j",
                                        "satisfied": (i + k) % 2 == 0}) + "\n"
                            for i, t in enumerate(doms) for k, a in enumerate(("a", "b"))))
    base = ("score", "--tasks", str(tasks), "--judgments", str(judg), "--resamples", "200")
    rows = list(csv.DictReader(io.StringIO(cli_out(capsys, *base, "--csv"))))
    n = {r["metric"]: r["n_tasks"] for r in rows if r["agent"] == "a" and r["metric"] != "diff"}
    assert n["overall"] == "3" and n["domain:company"] == "2" and n["domain:policy"] == "1"
    policy = next(r for r in rows if r["agent"] == "a" and r["metric"] == "domain:policy")
    assert policy["ci_lo"] == "" and policy["ci_reason"] == "n=1: no interval"
    a = json.loads(cli_out(capsys, *base, "--json"))["agents"]["a"]
    assert a["domain_n_tasks"] == {"company": 2, "policy": 1} and a["n_tasks"] == 3
    assert a["domain_ci95"]["policy"] is None and a["domain_ci95_reason"] == {"policy": "n=1: no interval"}
