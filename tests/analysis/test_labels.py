"""Labels: one per decision, by source, or taken from a reference judge's judgments."""

from __future__ import annotations

import pytest

from lifesearch_local.analysis import agreement as ag
from lifesearch_local.analysis.labels import label_index, labels_from_judgments
from lifesearch_local.errors import LifesearchError
from lifesearch_local.records import Judgment, Label
from lifesearch_local.rundir.jsonl import read_records
from tests.helpers.inputs import AGREE


def test_label_errors(agree_records):
    bad = [*agree_records["labels"], Label(task_id="t1", agent="alpha", rubric_id="r1", satisfied=False, source="gemini")]
    with pytest.raises(LifesearchError, match="conflicting labels.*--label-source"):
        label_index(bad)
    assert len(label_index(bad, source="human")) == 15
    assert label_index(bad, source="gemini") == {("t1", "alpha", 0, "r1"): False}
    with pytest.raises(LifesearchError, match="no labels with source 'x'"):
        label_index(bad, source="x")
    unknown = {("t1", "alpha", 0, "r9"): True}
    with pytest.raises(LifesearchError, match="unknown rubric"):
        ag.agreement(agree_records["tasks"], agree_records["judgments"], unknown)


def test_labels_from_judgments():
    ref = read_records(AGREE / "ref_judgments.jsonl", Judgment)
    labels, skipped = labels_from_judgments(ref, "gemini-3.1-pro")
    assert (len(labels), skipped) == (14, 1)
    assert {lab.source for lab in labels} == {"gemini-3.1-pro"}
    with pytest.raises(LifesearchError, match=r"no judgments by judge 'nope'.*found: gemini-3.1-pro"):
        labels_from_judgments(ref, "nope")
    runs = [j.model_copy(update={"judge_run": 1, "satisfied": not j.satisfied}) for j in ref if j.satisfied is not None]
    first, _ = labels_from_judgments(ref + runs, "gemini-3.1-pro")
    assert sorted(lab.satisfied for lab in first) == sorted(lab.satisfied for lab in labels)  # run 0 by default
    second, _ = labels_from_judgments(ref + runs, "gemini-3.1-pro#1")
    assert all(a.satisfied != b.satisfied for a, b in zip(sorted(first, key=str), sorted(second, key=str), strict=True))
