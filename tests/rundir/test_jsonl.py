"""JSONL reading: every bad line located by file:line:field (digits, nesting, surrogates, duplicate keys)."""

from __future__ import annotations

import json

import pytest

from lifesearch_local.cli import main
from lifesearch_local.errors import InputError
from lifesearch_local.records import Judgment, Report
from lifesearch_local.rundir.jsonl import read_json_file, read_records
from tests.helpers.cli import run_cli
from tests.helpers.inputs import HUGE, J, R, judge_inputs, rubric, task, write_jsonl

# -- numbers, keys, text and nesting a lax parser would let through -------------------------------------------

def test_a_5000_digit_integer_is_a_located_error_in_validate_score_judge(tmp_path, capsys):
    tasks, reports = judge_inputs(tmp_path)
    bad_tasks = tmp_path / "bad_tasks.jsonl"
    bad_tasks.write_text(tasks.read_text() + '{"id": "t9", "x": ' + HUGE + "}\n")
    code, _, err = run_cli(["validate", str(bad_tasks)], capsys)
    assert code == 2 and f"{bad_tasks}:3:" in err and "Traceback" not in err, err
    bad_reports = tmp_path / "bad_reports.jsonl"
    bad_reports.write_text(reports.read_text() + '{"task_id": "t0", "agent": "b", "run": ' + HUGE + ', "text": "x"}\n')
    code, _, err = run_cli(["judge", "--tasks", str(tasks), "--reports", str(bad_reports), "--model", "tiny-llama",
                            "--out", str(tmp_path / "j"), "--quiet"], capsys)
    assert code == 2 and f"{bad_reports}:3:" in err, err
    judgments = tmp_path / "judgments.jsonl"
    judgments.write_text(json.dumps(J) + "\n" + json.dumps(J)[:-1] + ', "truncated_tokens": ' + HUGE + "}\n")
    code, _, err = run_cli(["score", "--tasks", str(tasks), "--judgments", str(judgments)], capsys)
    assert code == 2 and f"{judgments}:2:" in err and "Traceback" not in err, err


def test_a_duplicate_key_is_a_located_error(tmp_path, capsys):
    path = tmp_path / "tasks.jsonl"
    line = json.dumps(task("t0", [rubric("R0", 0.5)], language="en"))
    path.write_text(line[:-1] + ', "language": "zh"}\n')
    code, _, err = run_cli(["validate", str(path)], capsys)
    assert code == 2 and f"{path}:1: language: duplicate key" in err, err


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


def test_tasks_pointing_at_a_directory_says_so(tmp_path, capsys):
    write_jsonl(tmp_path / "tasks.jsonl", [task("t1", [rubric("R1", 1.0)])])
    assert main(["validate", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}: is a directory; pass a JSONL file (it holds tasks.jsonl)" in err and "no such file" not in err


def test_a_misspelt_field_of_a_record_gets_did_you_mean(tmp_path):
    from lifesearch_local.rundir.jsonl import known_keys

    path = write_jsonl(tmp_path / "judgments.jsonl", [J, {**{k: v for k, v in J.items() if k != "p_true"}, "p_ture": 0.5}])
    with pytest.raises(InputError) as e:
        read_records(path, Judgment)
    assert str(e.value) == f"{path}:2: p_ture: Extra inputs are not permitted; did you mean 'p_true'?"
    # through lists, optionals and the model block's tagged union
    from lifesearch_local.run.config import RunConfig

    assert "max_iterations" in known_keys(RunConfig, ("agents", 0))
    assert "kernel" in known_keys(RunConfig, ("judges", 1, "model", "hf"))
    assert "kernel" not in known_keys(RunConfig, ("judge", "model", "openai")) and known_keys(RunConfig, ("nope",)) == []


@pytest.mark.parametrize("line, message", [
    (b'{"task_id": "t0", "agent": "a", "text": "\xff\xfe"}', "not UTF-8 text"),
    (b'{"task_id": "t0", "agent": "a", "text": "x", "run": 1e999}', "1e999 is beyond the range of a float"),
])
def test_a_line_that_is_not_utf8_or_a_float_beyond_range_is_located(tmp_path, line, message):
    path = tmp_path / "reports.jsonl"
    path.write_bytes(json.dumps(R).encode() + b"\n" + line + b"\n")
    with pytest.raises(InputError, match=f"reports.jsonl:2: .*{message}"):
        read_records(path, Report)


def test_a_whole_file_json_larger_than_the_cap_is_refused_unread(tmp_path):
    path = tmp_path / "summary.json"
    path.write_bytes(b'{"a": "' + b"x" * (2 << 20) + b'"}')
    with pytest.raises(InputError, match=r"summary.json: larger than 1 MiB"):
        read_json_file(path, max_bytes=1 << 20)
    assert read_json_file(path)["a"] == "x" * (2 << 20)
