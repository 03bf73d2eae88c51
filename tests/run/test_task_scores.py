"""Leaderboard sources: each kind told apart by content, read exactly, refused in one line when it is none."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.run.task_scores import read_source, source_kind
from tests.helpers.drb2 import published_dir
from tests.helpers.inputs import AGREE
from tests.helpers.report_runs import make_run_dir

WIDE = ("idx,language,theme,OpenAI,gemini,avg\n"
        "7,zh,Health,0.5,0.25,0.375\n"
        "3,en,Finance & Business,,0.75,0.75\n"
        "avg,,,0.5,0.5,0.5\n")


def test_each_kind_is_told_apart_by_content(tmp_path):
    run = make_run_dir(tmp_path / "run", extras=False)
    wide = tmp_path / "scores.txt"  # the name says nothing: the header does
    wide.write_text(WIDE)
    long_csv = tmp_path / "long.csv"
    long_csv.write_text("agent,task_id,score\na,t1,0.5\n")
    long_jsonl = tmp_path / "long.jsonl"
    long_jsonl.write_text(json.dumps({"agent": "a", "task_id": "t1", "score": 0.5}) + "\n")
    assert [source_kind(p) for p in (run, run / "judgments.jsonl", wide, long_csv, long_jsonl)] == [
        "run directory", "judgments file", "wide table", "long table", "long table"]


@pytest.mark.parametrize("content", ["", "a,b,c\n1,2,3\n", '{"task_id": "t1"}\n', "\x00\x01binary"])
def test_an_unknown_source_is_refused_in_one_line(tmp_path, content):
    p = tmp_path / "x.csv"
    p.write_text(content)
    with pytest.raises(InputError) as e:
        source_kind(p)
    assert "not a source of task scores" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(InputError, match="without judgments.jsonl"):
        source_kind(tmp_path)
    with pytest.raises(InputError, match="no such file"):
        source_kind(tmp_path / "absent.csv")


def test_wide_table_as_drb2_writes_it(tmp_path):
    """The avg row is ignored, an empty cell is a task not scored, idx → drb2-<idx>, theme → domain,
    agg_scores_<dim>.csv names the dimension."""
    p = tmp_path / "agg_scores_analysis.csv"
    p.write_text(WIDE)
    (t,) = read_source(p)
    assert t.dimension == "analysis" and t.judge is None
    assert t.scores == {"OpenAI": {"drb2-7": 0.5}, "gemini": {"drb2-7": 0.25, "drb2-3": 0.75}}
    assert t.domains == {"drb2-7": "Health", "drb2-3": "Finance & Business"}
    other = tmp_path / "published.csv"
    other.write_text(WIDE)
    assert read_source(other)[0].dimension == "total"


@pytest.mark.parametrize(("cell", "why"), [("1.5", "not a share between 0 and 1"), ("45.4", "not a share"),
                                          ("nan", "not a share"), ("x", "not a number")])
def test_a_value_that_is_not_a_share_is_refused_naming_the_line(tmp_path, cell, why):
    p = tmp_path / "t.csv"
    p.write_text(WIDE.replace("0.25", cell))
    with pytest.raises(InputError, match=why) as e:
        read_source(p)
    assert str(e.value).startswith(f"{p}:2: gemini:")


def test_duplicates_are_refused(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(WIDE + "7,zh,Health,0.1,0.1,0.1\n")
    with pytest.raises(InputError, match="task 7 appears twice"):
        read_source(p)
    q = tmp_path / "l.csv"
    q.write_text("agent,task_id,score\na,t1,0.5\na,t1,0.6\n")
    with pytest.raises(InputError, match="a second score of a on t1"):
        read_source(q)


@pytest.mark.parametrize(("row", "field"), [({"agent": "a\u0000b"}, "agent"), ({"task_id": "t\u00851"}, "task_id"),
                                          ({"judge": "j\u007f"}, "judge"), ({"agent": "\u200b"}, "agent")])
def test_a_name_with_a_control_character_is_refused_naming_the_line(tmp_path, row, field):
    """Published tables reached every table and export with a NUL, C1 or DEL in an agent, task or judge
    name: refused as every other loader of ids does, file:line: field."""
    p = tmp_path / "long.jsonl"
    p.write_text(json.dumps({"agent": "a", "task_id": "t0", "score": 0.5}) + "\n"
                 + json.dumps({"agent": "a", "task_id": "t1", "score": 0.5, **row}) + "\n")
    with pytest.raises(InputError, match="control character|empty") as e:
        read_source(p)
    assert str(e.value).startswith(f"{p}:2: {field}:")


def test_a_system_column_with_a_control_character_is_refused(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(WIDE.replace("gemini", "gem\u0001ini", 1))
    with pytest.raises(InputError, match="control character U\\+0001"):
        read_source(p)


def test_long_table_with_dimensions_domains_and_judges(tmp_path):
    p = tmp_path / "long.jsonl"
    rows = [{"agent": "a", "task_id": "t1", "score": 0.5, "dimension": "analysis", "domain": "policy", "judge": "j1"},
            {"agent": "a", "task_id": "t1", "score": 1, "judge": "j1"},
            {"agent": "b", "task_id": "t1", "score": 0.0, "judge": "j2"}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = {(t.judge, t.dimension): t for t in read_source(p)}
    assert set(got) == {("j1", "analysis"), ("j1", "total"), ("j2", "total")}
    assert got[("j1", "analysis")].scores == {"a": {"t1": 0.5}} and got[("j1", "analysis")].domains == {"t1": "policy"}
    assert got[("j1", "total")].scores == {"a": {"t1": 1.0}}


def test_run_directory_and_judgments_file_score_as_score_does(tmp_path):
    from lifesearch_local.analysis.scoring import score_by_judge
    from lifesearch_local.records import Judgment
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks

    run = make_run_dir(tmp_path / "run", extras=False)
    tables = {t.judge: t for t in read_source(run)}
    want = score_by_judge(load_tasks(AGREE / "tasks.jsonl"), read_records(AGREE / "judgments.jsonl", Judgment))
    assert set(tables) == set(want)
    for judge, rows in want.items():
        assert tables[judge].scores == {a: r.tasks for a, r in rows.items()}
        assert tables[judge].means == {a: r.overall_mean for a, r in rows.items()}
    with pytest.raises(LifesearchError, match="needs --tasks"):
        read_source(AGREE / "judgments.jsonl")
    by_file = {t.judge: t for t in read_source(AGREE / "judgments.jsonl", tasks_path=AGREE / "tasks.jsonl")}
    assert by_file["choice-a"].scores == tables["choice-a"].scores
    only = read_source(run, task_ids={"t1"})
    assert all(set(s) == {"t1"} for t in only for s in t.scores.values())


def test_run_directory_without_tasks_says_what_to_pass(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "judgments.jsonl").write_text((AGREE / "judgments.jsonl").read_text())
    with pytest.raises(LifesearchError, match="pass --tasks FILE"):
        read_source(run)


def test_the_published_drb2_table():
    """All 132 tasks and 7 systems of DRB II's published totals; each system's mean equals the file's avg row."""
    path = published_dir() / "agg_scores_total.csv"
    if not path.is_file():
        pytest.skip(f"{path} absent (../shared)")
    (t,) = read_source(path)
    with open(path, encoding="utf-8") as f:
        avg = next(r for r in csv.DictReader(f) if r["idx"] == "avg")
    assert len(t.scores) == 7 and len(t.tasks()) == 132
    for system, scores in t.scores.items():
        assert sum(scores.values()) / len(scores) == pytest.approx(float(avg[system]), abs=5e-7), system
    assert min(len(s) for s in t.scores.values()) < 132  # some cells are empty: not scored


def test_wide_table_needs_no_particular_file_name(tmp_path):
    p = Path(tmp_path / "x")
    p.write_text(WIDE)
    assert read_source(p)[0].scores["OpenAI"] == {"drb2-7": 0.5}


def test_an_unreadable_csv_is_one_line(tmp_path):
    p = tmp_path / "t.csv"
    p.write_bytes(WIDE.encode() + b"9,en,Health,\xff\xfe,0.1,0.1\n")
    with pytest.raises(InputError, match="not a readable CSV"):
        read_source(p)
