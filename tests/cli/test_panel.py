"""`lifesearch panel`: a panel's judgments written, then scored, compared with labels and reported like any judge's."""

from __future__ import annotations

import json
import re

import pytest

from lifesearch_local.records import Judgment
from lifesearch_local.rundir.jsonl import read_records
from tests.helpers.cli import run_cli
from tests.helpers.inputs import rubric, task, write_jsonl

# Two tasks of two rubrics (weight 0.5 each), agents x (truly satisfies every rubric) and y (none).
KEYS = [(a, t, r) for a in ("x", "y") for t in ("t0", "t1") for r in ("R0", "R1")]
# Each member errs on one decision of x, a different one: each scores x 0.75 and is right on 7 of
# 8 decisions; the majority of three is right on all of them.
WRONG = {"a": ("x", "t0", "R0"), "b": ("x", "t0", "R1"), "c": ("x", "t1", "R0")}


@pytest.fixture
def inputs(tmp_path):
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task(t, [rubric("R0", 0.5), rubric("R1", 0.5)]) for t in ("t0", "t1")])
    labels = write_jsonl(tmp_path / "labels.jsonl", [
        {"task_id": t, "agent": a, "run": 0, "rubric_id": r, "satisfied": a == "x"} for a, t, r in KEYS])
    judgments = write_jsonl(tmp_path / "judgments.jsonl", [
        {"task_id": t, "agent": a, "run": 0, "rubric_id": r, "judge": m, "satisfied": (a == "x") != ((a, t, r) == bad),
         "p_true": 0.8 if (a == "x") != ((a, t, r) == bad) else 0.3}
        for m, bad in WRONG.items() for a, t, r in KEYS])
    return tasks, labels, judgments


def make_panel(capsys, judgments, out, *extra):
    return run_cli(["panel", "--judgments", str(judgments), "--members", "a,b,c", "--id", "panel", "--out", str(out),
                    *extra], capsys)


def test_panel_writes_one_verdict_per_decision_naming_members_and_rule(inputs, tmp_path, capsys):
    _, _, judgments = inputs
    code, out, err = make_panel(capsys, judgments, tmp_path / "panel" / "p.jsonl")
    assert code == 0, err
    assert "panel panel (majority of a, b, c): 8 decisions ->" in out
    panel = read_records(tmp_path / "panel" / "p.jsonl", Judgment)
    assert len(panel) == 8 and {j.judge for j in panel} == {"panel"}
    by = {(j.agent, j.task_id, j.rubric_id): j for j in panel}
    assert all(by[k].satisfied == (k[0] == "x") for k in KEYS)  # every member's lone error outvoted
    assert by[WRONG["a"]].panel.votes == [False, True, True] and by[WRONG["a"]].panel.combine == "majority"
    # a second run refuses to overwrite, and never writes over the members' own file
    code, _, err = make_panel(capsys, judgments, tmp_path / "panel" / "p.jsonl")
    assert code == 2 and "exists" in err
    code, _, err = make_panel(capsys, judgments, judgments, "--force")
    assert code == 2 and "file of its own" in err and len(read_records(judgments, Judgment)) == 24


def test_score_and_agree_read_a_panel_like_any_judge(inputs, tmp_path, capsys):
    tasks, labels, judgments = inputs
    assert make_panel(capsys, judgments, tmp_path / "p.jsonl")[0] == 0
    code, out, err = run_cli(["score", "--tasks", str(tasks), "--judgments", str(tmp_path / "p.jsonl"), "--json",
                              "--resamples", "200"], capsys)
    assert code == 0, err
    agents = json.loads(out)["agents"]
    assert json.loads(out)["judge"] == "panel"
    assert agents["x"]["overall_mean"] == 1.0 and agents["y"]["overall_mean"] == 0.0
    both = write_jsonl(tmp_path / "all.jsonl", [json.loads(line) for f in (judgments, tmp_path / "p.jsonl")
                                                for line in f.read_text().splitlines()])
    code, out, err = run_cli(["agree", "--tasks", str(tasks), "--judgments", str(both), "--labels", str(labels), "--json",
                              "--resamples", "200"], capsys)
    assert code == 0, err
    judges = json.loads(out)["judges"]
    assert judges["panel"]["accuracy_mean"] == 1.0
    assert {judges[m]["accuracy_mean"] for m in "abc"} == {7 / 8}


def test_report_shows_the_panel_and_its_members(inputs, tmp_path, capsys):
    tasks, labels, judgments = inputs
    run = tmp_path / "run"
    run.mkdir()
    assert make_panel(capsys, judgments, tmp_path / "p.jsonl")[0] == 0
    write_jsonl(run / "judgments.jsonl", [json.loads(line) for f in (judgments, tmp_path / "p.jsonl")
                                          for line in f.read_text().splitlines()])
    code, out, err = run_cli(["report", str(run), "--tasks", str(tasks), "--labels", str(labels)], capsys)
    assert code == 0, err
    page = (run / "report.html").read_text()
    assert 'id="scores-panel"' in page and 'id="scores-a"' in page
    panels = page[page.index('id="panels"'):]
    assert re.search(r"<td[^>]*>panel</td><td[^>]*>majority</td><td[^>]*>a, b, c</td>", panels)
    agreement = page[page.index('id="agreement"'):page.index('id="panels"')]
    assert re.search(r"<td[^>]*>panel</td>", agreement)  # the panel has its row in the agreement table


def test_labels_give_the_members_error_agreement(inputs, tmp_path, capsys):
    _, labels, judgments = inputs
    code, out, err = make_panel(capsys, judgments, tmp_path / "p.jsonl", "--labels", str(labels))
    assert code == 0, err
    # each member is wrong on one decision of eight, never the same one: κ of their errors is −1/7 (disjoint)
    assert "errors of a and b: κ -0.14 over 8 labelled decisions (0 wrong together)" in out
    assert "WARNING" not in out
    same = write_jsonl(tmp_path / "same.jsonl", [
        {"task_id": t, "agent": a, "run": 0, "rubric_id": r, "judge": m, "satisfied": (a == "x") != ((a, t, r) in WRONG.values()),
         "p_true": 0.5} for m in "abc" for a, t, r in KEYS])
    code, out, err = make_panel(capsys, same, tmp_path / "q.jsonl", "--labels", str(labels))
    assert code == 0 and "κ +1.00" in out and "WARNING: correlated errors" in out


def test_a_panel_id_with_a_control_character_is_refused_where_it_enters(inputs, tmp_path, capsys):
    _, _, judgments = inputs
    with pytest.raises(SystemExit) as e:
        run_cli(["panel", "--judgments", str(judgments), "--members", "a,b,c", "--id", "p\x1b]0;x\x07",
                 "--out", str(tmp_path / "p.jsonl")], capsys)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --id: not an id: control character U+001B at character 1" in err
    assert "Traceback" not in err and "\x1b" not in err and not (tmp_path / "p.jsonl").exists()


def test_an_out_that_cannot_be_written_is_one_line(inputs, tmp_path, capsys):
    _, _, judgments = inputs
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "victim").write_text("keep")
    (ro / "p.jsonl").symlink_to(ro / "victim")
    code, _, err = make_panel(capsys, judgments, ro / "p.jsonl", "--force")
    assert code == 2 and "is a symbolic link" in err and (ro / "victim").read_text() == "keep"
    code, _, err = make_panel(capsys, judgments, tmp_path / "file" / "sub" / "p.jsonl")
    assert code == 0, err
    (tmp_path / "plain").write_text("x")
    code, _, err = make_panel(capsys, judgments, tmp_path / "plain" / "p.jsonl")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
