"""Records refuse what lax parsing would let through: booleans as numbers, lone surrogates, deep nesting."""

from __future__ import annotations

import json

import pytest
from conftest import rubric, task, write_jsonl

from lifesearch_local.errors import InputError
from lifesearch_local.records import Judgment, Label, Report
from lifesearch_local.rundir.jsonl import read_records

J = {"task_id": "t", "agent": "a", "run": 0, "rubric_id": "R1", "judge": "j", "satisfied": True, "p_true": 0.9}
L = {"task_id": "t", "agent": "a", "run": 0, "rubric_id": "R1", "satisfied": True}
R = {"task_id": "t", "agent": "a", "run": 0, "text": "A report."}

STRICT = [
    (Judgment, J, "p_true", True),
    (Judgment, J, "p_true", "0.9"),
    (Judgment, J, "satisfied", 1),
    (Judgment, J, "satisfied", "true"),
    (Judgment, J, "run", True),
    (Judgment, J, "judge_run", False),
    (Judgment, J, "truncated_tokens", True),
    (Label, L, "satisfied", "yes"),
    (Label, L, "satisfied", 0),
    (Label, L, "run", True),
    (Report, R, "iterations", True),
    (Report, R, "output_tokens", "12"),
    (Report, R, "wall_s", True),
]


@pytest.mark.parametrize("model,good,field,value", STRICT, ids=[f"{m.__name__}.{f}={v!r}" for m, _, f, v in STRICT])
def test_numbers_and_flags_are_strict(tmp_path, model, good, field, value):
    path = write_jsonl(tmp_path / "x.jsonl", [good, {**good, field: value}])
    with pytest.raises(InputError) as e:
        read_records(path, model)
    assert e.value.line == 2 and e.value.field == field, str(e.value)


def test_genuine_numbers_still_load(tmp_path):
    path = write_jsonl(tmp_path / "j.jsonl", [{**J, "p_true": 1, "run": 2}, {**J, "rubric_id": "R2", "satisfied": None, "p_true": None}])
    a, b = read_records(path, Judgment)
    assert a.p_true == 1.0 and isinstance(a.p_true, float) and a.run == 2 and b.satisfied is None


@pytest.mark.parametrize("field", ["text", "task_id", "agent"])
def test_lone_surrogate_in_a_report_is_located(tmp_path, field):
    bad = json.dumps({**R, field: R[field] + "\ud800"})  # json.dumps escapes it: valid JSON, invalid text
    path = tmp_path / "reports.jsonl"
    path.write_text(json.dumps(R) + "\n" + bad + "\n")
    with pytest.raises(InputError) as e:
        read_records(path, Report)
    assert e.value.line == 2 and e.value.field == field and "surrogate" in str(e.value)


def test_deep_nesting_in_a_judgment_line_is_located(tmp_path):
    path = tmp_path / "judgments.jsonl"
    path.write_text(json.dumps(J) + "\n" + '{"raw": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(InputError) as e:
        read_records(path, Judgment)
    assert e.value.line == 2 and "nested deeper" in str(e.value)


def test_judge_refuses_a_report_with_a_lone_surrogate_before_judging(tmp_path, capsys):
    from lifesearch_local.cli import main

    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task("t", [rubric("R1", 0.5)])])
    reports = tmp_path / "reports.jsonl"
    reports.write_text(json.dumps(R) + "\n" + json.dumps({**R, "agent": "b", "text": "x\udfff"}) + "\n")
    cfg = tmp_path / "judge.yaml"
    cfg.write_text("judge:\n  id: tiny\n  model:\n    model: tiny-llama\n")
    code = main(["judge", "--tasks", str(tasks), "--reports", str(reports), "--config", str(cfg), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and f"{reports}:2: text: lone surrogate \\udfff" in err, err
    assert "Traceback" not in err and not (tmp_path / "out" / "judgments.jsonl").exists()


def test_validate_refuses_a_task_with_a_lone_surrogate(tmp_path, capsys):
    from lifesearch_local.cli import main

    path = tmp_path / "tasks.jsonl"
    row = json.dumps(task("t", [rubric("R1", 0.5)], question="What\ud800?"))
    path.write_text(row + "\n")
    assert main(["validate", str(path)]) == 2
    assert f"{path}:1: question: lone surrogate" in capsys.readouterr().err
