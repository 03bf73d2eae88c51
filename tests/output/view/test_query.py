"""Filters, orders, pages and the diff of two judges, on hand-made decisions with known answers."""

from __future__ import annotations

import math
from urllib.parse import parse_qs

import numpy as np
import pytest

from lifesearch_local.analysis.disagreements import confidence, disagreements
from lifesearch_local.analysis.labels import label_index
from lifesearch_local.output.view.index import build_index
from lifesearch_local.output.view.query import Query, QueryError, diff, page_of, select
from lifesearch_local.records import Judgment, Label
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from tests.helpers.inputs import AGREE, write_jsonl


def row(task, agent, rubric, judge, satisfied, p=None, **kw):
    return {"task_id": task, "agent": agent, "run": 0, "rubric_id": rubric, "judge": judge, "satisfied": satisfied,
            "p_true": p, **kw}


ROWS = [
    row("t0", "a", "R0", "j", True, 0.9),  # label true: agrees
    row("t0", "a", "R1", "j", False, 0.2),  # label true: disagrees, confidence 0.8
    row("t0", "b", "R0", "j", None),  # label false: an ungraded verdict disagrees, no confidence
    row("t1", "a", "R0", "j", True, 0.55, truncated_tokens=50),  # label false: disagrees, confidence 0.55
    row("t1", "a", "R0", "k", False, 0.05, reason="Mentions ACME"),  # label false: agrees
    row("t1", "b", "R0", "k", True, 0.7),  # no label
]
LABELS = {("t0", "a", 0, "R0"): True, ("t0", "a", 0, "R1"): True, ("t0", "b", 0, "R0"): False, ("t1", "a", 0, "R0"): False}


@pytest.fixture
def ix(tmp_path):
    return build_index(write_jsonl(tmp_path / "j.jsonl", ROWS), labels=LABELS)


def shown(ix, **params) -> list[int]:
    return select(ix, Query.parse({k: [v] for k, v in params.items()})).tolist()


@pytest.mark.parametrize(("params", "want"), [
    ({}, [0, 1, 2, 3, 4, 5]),
    ({"verdict": "true"}, [0, 3, 5]), ({"verdict": "false"}, [1, 4]), ({"verdict": "ungraded"}, [2]),
    ({"agreement": "agree"}, [0, 4]), ({"agreement": "disagree"}, [1, 2, 3]),
    ({"agreement": "labelled"}, [0, 1, 2, 3, 4]), ({"agreement": "unlabelled"}, [5]),
    ({"truncated": "yes"}, [3]), ({"truncated": "no"}, [0, 1, 2, 4, 5]),
    ({"task": "t1", "judge": "k"}, [4, 5]), ({"agent": "b"}, [2, 5]), ({"rubric": "R1"}, [1]),
    ({"q": "acme"}, [4]), ({"q": "ACME", "verdict": "true"}, []), ({"task": "no-such-task"}, []),
])  # fmt: skip
def test_filters(ix, params, want):
    assert shown(ix, **params) == want


def test_sort_by_confidence_is_highest_first_and_none_last(ix):
    # the probability each judge gave its own verdict: 0.9, 0.8, none (ungraded), 0.55, 0.95, 0.7
    assert shown(ix, sort="confidence") == [4, 0, 1, 5, 3, 2]
    assert shown(ix, sort="confidence", agreement="disagree") == [1, 3, 2]


def test_other_orders(ix):
    assert shown(ix, sort="p_true") == [4, 1, 3, 5, 0, 2]
    assert shown(ix, sort="-p_true") == [0, 5, 3, 1, 4, 2]
    assert shown(ix, sort="truncated") == [3, 0, 1, 2, 4, 5]


def test_disagreements_rank_as_the_analysis_ranks_them():
    labels = label_index(read_records(AGREE / "labels.jsonl", Label))
    ix = build_index(AGREE / "judgments.jsonl", labels=labels)
    got = select(ix, Query(agreement="disagree", sort="confidence"))
    want = disagreements(load_tasks(AGREE / "tasks.jsonl"), read_records(AGREE / "judgments.jsonl", Judgment), labels)
    assert len(got) == len(want) > 10
    conf = [confidence(None if ix.verdict[i] == -1 else bool(ix.verdict[i]),
                       None if math.isnan(ix.p_true[i]) else float(ix.p_true[i])) for i in got]
    assert [None if c is None else round(c, 9) for c in conf] == [None if d["confidence"] is None else round(d["confidence"], 9) for d in want]
    keys = {(ix.judges.names[ix.judge[i]], *ix.key(i)) for i in got}
    assert keys == {(d["judge"] + (f"#{d['judge_run']}" if d["judge_run"] else ""), d["task_id"], d["agent"], d["run"],
                     d["rubric_id"]) for d in want}


@pytest.mark.parametrize(("params", "message"), [
    ({"colour": ["red"]}, "unknown parameter 'colour'"),
    ({"verdict": ["yes"]}, "verdict='yes': one of true, false, ungraded"),
    ({"agreement": ["maybe"]}, "agreement='maybe'"),
    ({"sort": ["random"]}, "sort='random'"),
    ({"page": ["0"]}, "page='0': a whole number from 1"),
    ({"page": ["-2"]}, "page='-2'"),
    ({"per_page": ["501"]}, "per_page='501': a whole number from 1 to 500"),
    ({"q": ["x" * 201]}, "q: at most 200 characters"),
])  # fmt: skip
def test_bad_parameters_are_refused(params, message):
    with pytest.raises(QueryError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Query.parse(params)


def test_encode_round_trips_and_leaves_defaults_out():
    q = Query(task="t<1>&", verdict="false", q="a b", page=3)
    assert Query.parse(parse_qs(q.encode())) == q
    assert Query().encode() == "" and Query(sort="file").encode() == ""
    assert Query.parse(parse_qs(q.encode(page=1))) == Query(task="t<1>&", verdict="false", q="a b")


def test_pages():
    pos = np.arange(120, 0, -1)
    p = page_of(pos, 2, 50)
    assert (p.rows, p.total, p.page, p.pages) == (list(range(70, 20, -1)), 120, 2, 3)
    assert page_of(pos, 3, 50).rows == list(range(20, 0, -1))
    assert page_of(pos, 99, 50).page == 3  # past the end: the last page
    empty = page_of(np.arange(0), 1, 50)
    assert (empty.rows, empty.total, empty.pages) == ([], 0, 1)


def test_diff_of_two_judges(tmp_path):
    a = build_index(write_jsonl(tmp_path / "a.jsonl", [
        row("t", "a", "R0", "x", True, 0.9), row("t", "a", "R1", "x", False, 0.4), row("t", "a", "R2", "x", True, 0.5),
        row("t", "a", "R3", "x", None), row("t", "a", "R4", "x", False, 0.3)]))
    b = build_index(write_jsonl(tmp_path / "b.jsonl", [
        row("t", "a", "R5", "y", True, 0.9), row("t", "a", "R3", "y", False, 0.2), row("t", "a", "R2", "y", False, 0.45),
        row("t", "a", "R1", "y", True, 0.7), row("t", "a", "R0", "y", True, 0.9)]))
    rows, matched = diff(a, "x", b, "y")
    assert matched == 4
    assert [(a.key(r.a)[3], b.key(r.b)[3], None if r.dp is None else round(r.dp, 9), r.flip) for r in rows] == [
        ("R1", "R1", 0.3, True), ("R2", "R2", 0.05, True), ("R3", "R3", None, True)]
    every, _ = diff(a, "x", b, "y", only_differ=False)
    assert [a.key(r.a)[3] for r in every] == ["R1", "R2", "R0", "R3"]
    assert diff(a, "x", b, "nobody") == ([], 0)
