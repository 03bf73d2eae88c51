"""`lifesearch validate`: what it accepts, what it refuses (located), and what it suggests instead."""

from __future__ import annotations

import json

from lifesearch_local.cli import main
from lifesearch_local.curate.stage import DRAFTS
from tests.helpers.cli import run_cli
from tests.helpers.curate import EN_QUERY, ZH_QUERY, Script, q, run_curate
from tests.helpers.inputs import R, rubric, task, write_jsonl


def test_validate_on_a_reports_file_suggests_what_works(tmp_path, capsys):
    reports = write_jsonl(tmp_path / "reports.jsonl", [R])
    code, _, err = run_cli(["validate", str(reports)], capsys)
    assert code == 2 and "--draft" not in err and "`lifesearch " in err, err
    suggested = err.split("`lifesearch ")[1].split("`")[0].split()
    code, out, err = run_cli(suggested, capsys)
    assert code == 0 and "ok: 1 reports" in out, err


def test_validate_accepts_a_long_cjk_task_id_that_the_agent_can_then_log(tmp_path, capsys):
    path = write_jsonl(tmp_path / "tasks.jsonl", [task("长" * 100, [rubric("R0", 0.5)])])
    code, out, err = run_cli(["validate", str(path)], capsys)
    assert code == 0, err


def test_validate_refuses_a_task_with_a_lone_surrogate(tmp_path, capsys):
    path = tmp_path / "tasks.jsonl"
    row = json.dumps(task("t", [rubric("R1", 0.5)], question="What\ud800?"))
    path.write_text(row + "\n")
    assert main(["validate", str(path)]) == 2
    assert f"{path}:1: question: lone surrogate" in capsys.readouterr().err


def test_draft_validates_only_with_draft(tmp_path, capsys):
    run_curate(tmp_path, [q(), q(ZH_QUERY, "q2", "zh")], Script())
    drafts = tmp_path / "out" / DRAFTS
    assert [json.loads(x) for x in drafts.read_text().splitlines()][0] == {
        "id": "q1", "language": "en", "domain": "financial", "question": EN_QUERY, "rubrics": []}
    assert main(["validate", "--draft", str(drafts)]) == 0
    assert "ok (draft): 2 tasks, 0 rubrics" in capsys.readouterr().out
    assert main(["validate", str(drafts)]) == 2
    assert f"{drafts}:1: rubrics: a non-empty list of rubrics is required" in capsys.readouterr().err
    # Draft mode still checks the rubrics that are there.
    bad = write_jsonl(tmp_path / "t.jsonl", [task("a", [rubric("R1", 0.0)])])
    assert main(["validate", "--draft", str(bad)]) == 2
