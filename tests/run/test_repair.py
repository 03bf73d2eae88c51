"""`lifesearch repair`: every valid line kept, the rest set aside and reported."""

from __future__ import annotations

import json

import pytest

from lifesearch_local.cli import main
from lifesearch_local.errors import InputError
from lifesearch_local.records import Judgment
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.jsonl import read_records
from tests.helpers.cli import run_cli
from tests.helpers.inputs import HUGE, J, write_jsonl


def test_repair_drops_a_line_with_a_5000_digit_integer(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "judgments.jsonl").write_text(json.dumps(J) + "\n" + '{"run": ' + HUGE + "}\n")
    code, stdout, err = run_cli(["repair", str(out)], capsys)
    assert code == 0 and "Traceback" not in err, err
    assert read_records(out / "judgments.jsonl", Judgment)[0].p_true == 0.9
    dropped = [json.loads(x) for x in (out / "judgments.jsonl.dropped").read_text().splitlines()]
    assert len(dropped) == 1 and "digits" in dropped[0]["why"]


def judgment(i: int, satisfied: bool = True) -> dict:
    return Judgment(task_id=f"t{i}", agent="a", rubric_id="R1", judge="j", satisfied=satisfied).model_dump(mode="json")


def test_repair_keeps_every_valid_line_and_reports_the_rest(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    rows = [judgment(0), judgment(1), judgment(2), judgment(1, satisfied=False), judgment(3), judgment(0), judgment(4)]
    write_jsonl(out / "judgments.jsonl", rows, raw_lines={3: '{"task_id": "t2", "agent": "a", "rub',
                                                           5: json.dumps({**judgment(3), "satisfied": "maybe"})})
    (out / "manifest.json").write_text("{torn")
    with pytest.raises(InputError, match=r"judgments.jsonl:3: malformed JSON.*lifesearch repair"):
        RunDir(out).load("judgments.jsonl", Judgment)
    assert main(["repair", str(out)]) == 0
    said = capsys.readouterr().out
    assert "judgments.jsonl: kept 3, dropped 4" in said
    for line in ("line 3: malformed JSON", "line 4: duplicate of line 2 (conflicting)", "line 5: satisfied: ",
                 "line 6: duplicate of line 1 (identical)", "manifest.json: kept 0, dropped 1 (renamed manifest.json.corrupt-"):
        assert line in said
    kept = RunDir(out).load("judgments.jsonl", Judgment)
    assert [(j.task_id, j.satisfied) for j in kept] == [("t0", True), ("t1", True), ("t4", True)]
    dropped = [json.loads(x) for x in (out / "judgments.jsonl.dropped").read_text().splitlines()]
    assert [d["line"] for d in dropped] == [3, 4, 5, 6] and dropped[0]["raw"].startswith('{"task_id": "t2"')
    assert not (out / "manifest.json").exists() and list(out.glob("manifest.json.corrupt-*"))
    assert main(["repair", str(out)]) == 0
    assert "nothing to repair" in capsys.readouterr().out
