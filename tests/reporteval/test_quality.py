"""The quality metric against a scripted backend: one packed group per report, generate mode, parsing."""

from __future__ import annotations

import json
import os

import pytest

from lifesearch_local.records import Report
from lifesearch_local.reporteval.items import ReportItem
from lifesearch_local.reporteval.quality import DIMENSIONS, judge_quality, parse_quality
from tests.helpers.reporteval import (
    CHOICE,
    GEN,
    ITEMS,
    RCFG,
    REPORT,
    ChoiceBackend,
    fake_judge_probs,
    peaked,
)

GOOD_Q = json.dumps({k: {"score": 3, "justification": f"{k} ok"} for k, _ in DIMENSIONS})


def test_quality_choice_one_packed_group_per_report():
    backend = ChoiceBackend(lambda key, i, req, ch: [1e-12, 0.1, 0.2, 0.3, 0.4 - 1e-12] if i == 0 else peaked(5, 2))
    recs = judge_quality(backend, CHOICE, RCFG, ITEMS)
    (groups,) = backend.choice_calls
    assert len(groups) == 2 and all(len(g.requests) == 5 for g in groups)
    texts = [r.messages[0]["content"] for r in groups[0].requests]
    shared = os.path.commonprefix(texts)
    assert REPORT in shared and "Question 0?" in shared  # the report is in the shared prefix
    tails = [t[len(shared):] for t in texts]
    assert all(k in tail and len(tail) < 400 for (k, _), tail in zip(DIMENSIONS, tails))  # only the dimension differs
    assert groups[0].requests[0].prefill == '{"score": '
    dims = recs[0].quality.dimensions
    assert dims[0].score == pytest.approx(0.1 + 0.4 + 0.9 + 1.6) and dims[0].label == 4  # Σ k·p(k) = 3.0
    assert dims[1].score == pytest.approx(2.0) and dims[1].label == 2
    assert recs[0].metric == "quality" and recs[0].mode == "choice" and "+" in recs[0].prompt_hash


def test_quality_generate_parses_retries_then_ungraded():
    answers = iter([f"Here you go:\n```json\n{GOOD_Q}\n```", "not json", '{"comprehensiveness": 9}'])
    backend = ChoiceBackend(fake_judge_probs, texts=lambda req: next(answers))
    empty = ReportItem(Report(task_id="t9", agent="a", text="  "), "Q?")
    recs = judge_quality(backend, GEN, RCFG, [*ITEMS, empty])
    assert len(backend.generate_calls) == 2 and len(backend.generate_calls[1]) == 1  # one retry, of the bad one only
    assert len(backend.generate_calls[0]) == 2  # the empty report is not sent
    assert backend.generate_calls[1][0].temperature == 0.7 and backend.generate_calls[0][0].max_tokens == RCFG.quality_max_tokens
    good, bad, skipped = (r.quality for r in recs)
    assert [d.score for d in good.dimensions] == [3.0] * 5 and good.dimensions[4].justification == "overall ok"
    assert all(d.score is None for d in bad.dimensions) and recs[1].note.startswith("ungraded")
    assert bad.raw == '{"comprehensiveness": 9}'
    assert recs[2].note == "empty report" and all(d.score is None for d in skipped.dimensions)


@pytest.mark.parametrize("text,expected", [
    (GOOD_Q, 3), (json.dumps({k: "2" for k, _ in DIMENSIONS}), 2), (json.dumps({k: {"score": 4.0} for k, _ in DIMENSIONS}), 4)])
def test_parse_quality_accepts(text, expected):
    assert [s for s, _ in parse_quality(text)] == [expected] * 5


@pytest.mark.parametrize("text", ["", "{}", json.dumps({k: 5 for k, _ in DIMENSIONS}), json.dumps({"comprehensiveness": 3})])
def test_parse_quality_rejects(text):
    assert parse_quality(text) is None
