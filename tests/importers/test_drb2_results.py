"""DRB II evaluator results <-> labels and judgments: the exact way back, blocked verdicts, located errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lifesearch_local.cli import main
from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.importers import drb2
from lifesearch_local.importers.drb2_results import export_from_dir, import_results
from lifesearch_local.records import Judgment, Label
from lifesearch_local.rundir.jsonl import read_records
from tests.helpers.drb2 import RESULTS, TASKS, lines, rows, run_import
from tests.helpers.inputs import write_jsonl


def decisions(records, agent, task="drb2-1", run=0) -> dict[str, bool]:
    return {x.rubric_id: x.satisfied for x in records if x.agent == agent and x.task_id == task
            and getattr(x, "judge_run", 0) == run}


def test_results_become_labels_and_judgments(tmp_path):
    out = run_import(tmp_path / "out")
    labels = read_records(out / "labels.jsonl", Label)
    judgments = read_records(out / "judgments.jsonl", Judgment)
    # sys-a idx 1: R1 1, R2 -1 (-> not satisfied, as aggregate_scores counts it), R3 0 (and R4, its repeated text), R5 1
    assert decisions(labels, "sys-a") == {"R1": True, "R2": False, "R3": False, "R4": False, "R5": True}
    assert decisions(labels, "sys-b") == {"R1": False, "R2": False, "R3": True, "R4": True, "R5": False}
    assert decisions(labels, "sys-a", "drb2-2") == {"R1": True, "R2": False}
    assert {x.source for x in labels} == {"gemini"} and len(labels) == 12  # the failed line (idx 3) gives none
    # the repeated grading of (sys-a, idx 1) is judge run 1, in judgments only
    assert decisions(judgments, "sys-a", run=1) == {"R1": True, "R2": True, "R3": False, "R4": False, "R5": True}
    assert {j.judge for j in judgments} == {"gemini"} and len(judgments) == 17
    first = next(j for j in judgments if j.rubric_id == "R1")
    assert first.reason == "Stated in section 2." and json.loads(first.raw)["evidence"] == "La Rance has run since 1966."
    info = json.loads((out / "import.json").read_text())["results"]
    assert (info["lines"], info["failed_lines"], info["repeat_lines"]) == (4, 1, 1)
    assert info["scores"] == {"1": 7, "0": 6, "-1": 1} and info["agents_without_reports"] == []
    assert info["rubrics_without_label"] == 0  # every rubric of each graded report has its label (R4 via R3's text)


@pytest.mark.parametrize(("mode", "r2"), [("fail", False), ("pass", True), ("skip", None)])
def test_blocked_verdict(tmp_path, mode, r2):
    out = run_import(tmp_path / "out", "--blocked-verdict", mode, "--judge-name", "gemini-2.5-pro")
    labels = read_records(out / "labels.jsonl", Label)
    assert decisions(labels, "sys-a").get("R2") == r2 and {x.source for x in labels} == {"gemini-2.5-pro"}
    info = json.loads((out / "import.json").read_text())["results"]
    assert info["rubrics_without_label"] == (1 if mode == "skip" else 0)
    # either way the way back gives -1 where the evaluator wrote -1
    assert [json.dumps(o, ensure_ascii=False) for _, o in export_from_dir(out, use="judgments")] == lines(RESULTS)


def test_results_round_trip_through_labels_and_judgments(tmp_path):
    out = run_import(tmp_path / "out")
    originals = lines(RESULTS)
    by_labels = [json.dumps(o, ensure_ascii=False) for _, o in export_from_dir(out, use="labels")]
    assert by_labels == originals[:4]  # the first grading of each report (and the failed line, verbatim)
    assert [json.dumps(o, ensure_ascii=False) for _, o in export_from_dir(out, use="judgments")] == originals
    # the scores come from the labels: flip one and the rebuilt line changes there and only there
    labels = read_records(out / "labels.jsonl", Label)
    flip = next(x for x in labels if x.agent == "sys-b" and x.rubric_id == "R3")
    flip.satisfied = False
    (out / "labels.jsonl").write_text("".join(x.model_dump_json() + "\n" for x in labels))
    back = [o for _, o in export_from_dir(out, use="labels")]
    key = "The report explains that ice load limits turbine choice."
    assert back[1]["result"]["scores"]["analysis"][key]["score"] == 0
    assert [json.dumps(o, ensure_ascii=False) for o in back][:1] + [json.dumps(o, ensure_ascii=False) for o in back][2:] == (
        originals[:1] + originals[2:4])
    # a missing decision is an error naming the results line, not a silent 0
    (out / "labels.jsonl").write_text("".join(x.model_dump_json() + "\n" for x in labels if x.agent != "sys-b"))
    with pytest.raises(LifesearchError, match=r"drb2_results.jsonl:2: no decision for task drb2-1, agent sys-b"):
        export_from_dir(out, use="labels")


def results_with(tmp_path: Path, change) -> Path:
    data = rows(RESULTS)
    change(data)
    return write_jsonl(tmp_path / "results.jsonl", data)


IR = "info_recall"
R1_TEXT = "The report names the Rance barrage as operating since 1966."


@pytest.mark.parametrize(("change", "field", "msg"), [
    (lambda d: d[1]["result"]["scores"][IR].update({"An invented rubric.": {"score": 1}}),
     f'result.scores.{IR}["An invented rubric."]', "not a info_recall rubric of task drb2-1"),
    (lambda d: d[0]["result"]["scores"][IR][R1_TEXT].update(score=2),
     f'result.scores.{IR}["The report names the Rance barrage as op…"].score', "expected 1, 0 or -1, got 2"),
    (lambda d: d[0]["result"]["scores"][IR][R1_TEXT].update(score=True),
     f'result.scores.{IR}["The report names the Rance barrage as op…"].score', "got True"),
    (lambda d: d[0]["result"]["scores"].update(style={}), "result.scores.style", "unknown DRB II dimension"),
    (lambda d: d[1].update(idx=99), "idx", "idx 99 is not in the tasks file"),
    (lambda d: d[1].update(idx="1"), "idx", "expected an integer"),
    (lambda d: d[1].pop("model"), "model", "missing"),
    (lambda d: d[1].update(model="sys\x00a"), "model", "control character U+0000"),
    (lambda d: d[1].update(model="\u200b"), "model", "empty"),
])
def test_bad_results_are_located(tmp_path, change, field, msg):
    path = results_with(tmp_path, change)
    result = drb2.import_drb2(TASKS)
    with pytest.raises(InputError) as exc:
        import_results(result, [path])
    line = 1 if "Rance" in field or "style" in field else 2
    assert (exc.value.path, exc.value.line, exc.value.field) == (str(path), line, field) and msg in exc.value.message


def test_cli_error_names_file_line_field_and_writes_nothing(tmp_path, capsys):
    path = results_with(tmp_path, lambda d: d[2]["result"]["scores"][IR]["报告指出冰凌会堵塞进水口。"].update(score="1"))
    out = tmp_path / "out"
    assert main(["import", "drb2", "--tasks", str(TASKS), "--results", str(path), "--out", str(out)]) == 2
    assert f'{path}:3: result.scores.info_recall["报告指出冰凌会堵塞进水口。"].score: expected 1, 0 or -1, got \'1\'' in (
        capsys.readouterr().err)
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
