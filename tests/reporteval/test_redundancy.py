"""The redundancy metric against a scripted backend: section pairs batched per report, generate mode."""

from __future__ import annotations

import pytest

from lifesearch_local.records import Report
from lifesearch_local.reporteval.config import ReportEvalConfig
from lifesearch_local.reporteval.items import ReportItem
from lifesearch_local.reporteval.redundancy import judge_redundancy, parse_redundancy
from tests.helpers.reporteval import (
    CHOICE,
    GEN,
    ITEMS,
    RCFG,
    ChoiceBackend,
    fake_judge_probs,
    peaked,
)


def test_redundancy_choice_pairs_batched_per_report():
    backend = ChoiceBackend(lambda key, i, req, ch: peaked(5, 4) if i % 2 else peaked(5, 1, top=1.0 - 4e-9))
    recs = judge_redundancy(backend, CHOICE, ReportEvalConfig(seed=5), ITEMS)
    (groups,) = backend.choice_calls  # one engine call for the batch, one group per report
    assert [len(g.requests) for g in groups] == [30, 30]  # 9 kept sections → 36 pairs, capped at 30
    r = recs[0].redundancy
    assert r.mode == "headings" and r.possible_pairs == 36 and len(r.pairs) == 30
    assert recs[0].seed == 5 and r.pairs == sorted(r.pairs, key=lambda p: (p.a, p.b))
    hi = peaked(5, 4)
    assert r.pairs[1].score == pytest.approx(sum(k * p for k, p in enumerate(hi)))
    assert r.mean == pytest.approx(sum(p.score for p in r.pairs) / len(r.pairs))
    first = groups[0].requests[0].messages[0]["content"]
    assert "[Passage A]\n## Part" in first and groups[0].requests[0].prefill == '{"score": '


def test_redundancy_generate_and_reports_without_pairs():
    backend = ChoiceBackend(fake_judge_probs, texts=lambda req: '{"score": 3, "reason": "one figure repeated"}')
    short = ReportItem(Report(task_id="s", agent="a", text="Only one paragraph."), "Q")
    recs = judge_redundancy(backend, GEN, RCFG, [ITEMS[0], short])
    assert all(p.score == 3.0 and p.reason == "one figure repeated" for p in recs[0].redundancy.pairs)
    assert recs[0].redundancy.mean == 3.0
    assert recs[1].redundancy.pairs == [] and recs[1].redundancy.mean is None and "fewer than two" in recs[1].note
    assert parse_redundancy('{"score": "4"}') == (4, "") and parse_redundancy('{"score": -1}') is None
