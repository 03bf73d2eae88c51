"""Records refuse what lax parsing would let through: booleans as numbers, numbers as strings, impossible p_true."""

from __future__ import annotations

import json

import pytest

from lifesearch_local.errors import InputError
from lifesearch_local.records import Judgment, Label, Report
from lifesearch_local.rundir.jsonl import read_records
from tests.helpers.inputs import J, L, R, write_jsonl


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "7.5", "-0.1"])
def test_an_impossible_p_true_is_refused_at_load(tmp_path, value):
    path = tmp_path / "judgments.jsonl"
    path.write_text(json.dumps(J) + "\n" + json.dumps(J)[:-1].replace('"p_true": 0.9', f'"p_true": {value}') + "}\n")
    with pytest.raises(InputError) as e:
        read_records(path, Judgment)
    assert e.value.line == 2, str(e.value)


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


CONTROL = [
    (Report, R, "task_id", "t\r=1+1"),
    (Report, R, "agent", "a\x00"),
    (Report, R, "agent", ""),
    (Report, R, "agent", "\u200b"),
    (Judgment, J, "judge", "j\x7f"),
    (Judgment, J, "rubric_id", "R\x9b0"),
    (Judgment, J, "agent", "\ta"),
    (Label, L, "task_id", "t0\n"),
    (Label, L, "source", "human\x1b[31m"),
]


@pytest.mark.parametrize("model,good,field,value", CONTROL, ids=[f"{m.__name__}.{f}={v!r}" for m, _, f, v in CONTROL])
def test_an_id_with_a_control_character_or_nothing_visible_is_refused_at_load(tmp_path, model, good, field, value):
    """C0, DEL and C1 controls (a \\r split a CSV row in two) and empty ids: file:line: field."""
    path = write_jsonl(tmp_path / "records.jsonl", [good, {**good, field: value}])
    with pytest.raises(InputError) as e:
        read_records(path, model)
    assert (e.value.line, e.value.field) == (2, field)
    assert str(e.value).startswith(f"{path}:2: {field}: ") and ("control character" in e.value.message or "empty" in e.value.message)


def test_ids_may_hold_any_visible_text(tmp_path):
    ok = ["=cmd|' /C calc'!A0", "任务 1", "a b", "t-1/x", "\u00e9t\u00e9"]
    path = write_jsonl(tmp_path / "reports.jsonl", [{**R, "task_id": t, "agent": t} for t in ok])
    assert [r.task_id for r in read_records(path, Report)] == ok
