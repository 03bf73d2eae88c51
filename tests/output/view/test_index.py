"""The decision index: columns equal to the records, labels applied, records read back, bad lines located."""

from __future__ import annotations

import math

import pytest

from lifesearch_local.analysis.labels import label_index
from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.output.view.index import build_index
from lifesearch_local.records import Judgment, Label
from lifesearch_local.rundir.jsonl import read_records
from tests.helpers.inputs import AGREE, J, write_jsonl


def test_columns_match_every_record_of_the_file():
    records = read_records(AGREE / "judgments.jsonl", Judgment)
    labels = label_index(read_records(AGREE / "labels.jsonl", Label))
    ix = build_index(AGREE / "judgments.jsonl", labels=labels)
    assert len(ix) == len(records) == 180
    assert ix.judges.names == ["choice-a", "choice-a#1", "choice-a#2", "gen-b", "gen-b#1", "const"]
    for i, j in enumerate(records):
        assert ix.key(i) == (j.task_id, j.agent, j.run, j.rubric_id)
        assert ix.judge_of(i) == (j.judge if j.judge_run == 0 else f"{j.judge}#{j.judge_run}")
        assert ix.verdict[i] == (-1 if j.satisfied is None else int(j.satisfied))
        assert (math.isnan(ix.p_true[i]) if j.p_true is None else ix.p_true[i] == j.p_true)
        want = labels.get((j.task_id, j.agent, j.run, j.rubric_id))
        assert ix.label[i] == (-1 if want is None else int(want))
    assert [ix.record(i) for i in (0, 97, 179)] == [records[0], records[97], records[179]]


def test_a_judge_that_is_a_label_source_is_not_compared_with_itself(tmp_path):
    labels = {("t0", "a", 0, "R0"): True}
    path = write_jsonl(tmp_path / "j.jsonl", [J, {**J, "judge": "gemini"}])
    ix = build_index(path, labels=labels, label_sources={"gemini"})
    assert ix.label.tolist() == [1, -1]


def test_search_text_holds_ids_criterion_and_reason_lower_cased(tmp_path):
    path = write_jsonl(tmp_path / "j.jsonl", [{**J, "reason": "Mentions ACME"}])
    ix = build_index(path, criteria={("t0", "R0"): "States the Revenue"})
    assert ix.text == ["t0\x1fa\x1fr0\x1fstates the revenue\x1fmentions acme"]


def test_a_torn_last_line_is_left_unread_and_blank_lines_skipped(tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_text(write_jsonl(tmp_path / "x.jsonl", [J]).read_text() + "\n" + '{"task_id": "t0", "ag')
    ix = build_index(path)
    assert len(ix) == 1 and ix.line.tolist() == [1]


def test_a_bad_line_names_file_line_and_field(tmp_path):
    path = write_jsonl(tmp_path / "j.jsonl", [J, {**J, "p_true": 1.5}])
    with pytest.raises(InputError) as err:
        build_index(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), 2, "p_true")


def test_positions_of_one_judge_by_key(tmp_path):
    path = write_jsonl(tmp_path / "j.jsonl", [J, {**J, "judge": "k"}, {**J, "rubric_id": "R1", "judge": "k"}])
    ix = build_index(path)
    assert ix.positions("k") == {("t0", "a", 0, "R0"): 1, ("t0", "a", 0, "R1"): 2}
    assert ix.positions("nobody") == {}


def test_a_file_rewritten_since_is_said_not_misread(tmp_path):
    path = write_jsonl(tmp_path / "j.jsonl", [J, {**J, "rubric_id": "R1"}])
    ix = build_index(path)
    write_jsonl(path, [{**J, "rubric_id": "R1"}, J])  # what `repair` may do: same size, other order
    with pytest.raises(LifesearchError, match=r"j.jsonl:1: the file changed since the viewer read it"):
        ix.record(0)
    path.write_text("")
    with pytest.raises(LifesearchError, match="changed since"):
        ix.record(1)
