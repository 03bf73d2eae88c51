"""Finding sources, reading their inputs as `report` does, and what is said when one is missing."""

from __future__ import annotations

import json
import shutil

import pytest

from lifesearch_local.analysis.scoring import score_by_judge, uncertainty_by_judge
from lifesearch_local.errors import LifesearchError
from lifesearch_local.output.view.sources import Inputs, discover, open_source, open_sources
from lifesearch_local.records import Judgment
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from tests.helpers.inputs import AGREE
from tests.helpers.view import LONG_TEXT, make_view_run


def test_discover_run_dirs_folders_of_them_and_files(tmp_path):
    a, b = make_view_run(tmp_path / "runs" / "a"), make_view_run(tmp_path / "runs" / "deep" / "b")
    (tmp_path / "runs" / "empty").mkdir()
    loose = tmp_path / "loose.jsonl"
    shutil.copy(AGREE / "judgments.jsonl", loose)
    assert discover([tmp_path / "runs", loose, a]) == [
        (a / "judgments.jsonl", a), (b / "judgments.jsonl", b), (loose, None), (a / "judgments.jsonl", a)]


def test_discover_refuses_a_path_with_nothing_to_show(tmp_path):
    with pytest.raises(LifesearchError, match="no such file or directory"):
        discover([tmp_path / "nope"])
    (tmp_path / "a" / "b" / "c" / "d").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c" / "d" / "judgments.jsonl").write_text("")  # three levels down: not searched
    assert discover([tmp_path / "a" / "b"]) == [(tmp_path / "a/b/c/d/judgments.jsonl", tmp_path / "a/b/c/d")]
    with pytest.raises(LifesearchError, match="no judgments.jsonl in it or in its subfolders"):
        discover([tmp_path / "a"])


def test_a_run_directory_with_its_inputs(tmp_path):
    run = make_view_run(tmp_path / "run")
    src = open_source(run / "judgments.jsonl", run, Inputs(), "run")
    assert src.problems == []
    assert sorted(src.tasks) == ["t1", "t2"] and src.labels_path == run / "labels.jsonl"
    assert src.report(("t1", "alpha", 0)).text == LONG_TEXT
    assert src.report(("t1", "alpha", 1)).run == 1
    assert src.report(("t9", "alpha", 0)) is None
    assert src.manifest["replays"][0]["sampled"] == 12


def test_the_leaderboard_is_score_s_numbers(tmp_path):
    run = make_view_run(tmp_path / "run")
    board = open_sources([run], Inputs())[0].leaderboard()
    tasks, js = load_tasks(run / "tasks.jsonl"), read_records(run / "judgments.jsonl", Judgment)
    scores = score_by_judge(tasks, js)
    unc = uncertainty_by_judge(tasks, js, scores)
    assert list(board["scores"]) == list(scores) == ["choice-a", "choice-a#1", "choice-a#2", "gen-b", "gen-b#1", "const"]
    for judge, rows in scores.items():
        for agent, r in rows.items():
            assert board["scores"][judge][agent].overall_mean == r.overall_mean
            assert board["uncertainty"][judge].ci95[agent] == unc[judge].ci95[agent]


def test_missing_tasks_and_conflicting_labels_are_said_not_fatal(tmp_path):
    loose = tmp_path / "alone" / "j.jsonl"
    loose.parent.mkdir()
    shutil.copy(AGREE / "judgments.jsonl", loose)
    src = open_sources([loose], Inputs())[0]
    assert len(src.index) == 180 and src.tasks == {}
    assert any("no tasks file" in p and "--tasks" in p for p in src.problems)
    assert "no tasks file" in src.leaderboard()["error"]
    labels = tmp_path / "labels.jsonl"
    row = {"task_id": "t1", "agent": "alpha", "run": 0, "rubric_id": "r1", "satisfied": True}
    labels.write_text(json.dumps(row) + "\n" + json.dumps({**row, "satisfied": False}) + "\n")
    given = open_sources([loose], Inputs(tasks=AGREE / "tasks.jsonl", labels=labels))[0]
    assert sorted(given.tasks) == ["t1", "t2"]
    assert any(p.startswith("labels not used: conflicting labels") for p in given.problems)
    assert (given.index.label == -1).all()
