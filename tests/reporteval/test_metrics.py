"""The three metrics against a scripted backend: prompts, packing, choice and generate modes, retries."""

from __future__ import annotations

import json
import os

import pytest

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Report
from lifesearch_local.reporteval.config import ReportEvalConfig
from lifesearch_local.reporteval.factuality import judge_factuality, parse_support
from lifesearch_local.reporteval.items import ReportItem
from lifesearch_local.reporteval.quality import DIMENSIONS, judge_quality, parse_quality
from lifesearch_local.reporteval.redundancy import judge_redundancy, parse_redundancy
from lifesearch_local.reporteval.sources import Source, source_key, split_chunks

from .conftest import ChoiceBackend, fake_judge_probs, peaked, prompt_parts

REPORT = "# R\n\n" + "\n\n".join(f"## Part {i}\nFact number {i} is here." for i in range(9))
ITEMS = [ReportItem(Report(task_id=f"t{i}", agent="a", text=REPORT), f"Question {i}?") for i in range(2)]
CHOICE = JudgeConfig(id="j")
GEN = JudgeConfig(id="g", mode="generate", retries=1)
RCFG = ReportEvalConfig()
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


def test_factuality_groups_by_source_chunk_source_before_claim_best_chunk_wins():
    text = ("Permits cost $45 a year [1]. Passes cost $15 [1]. Fridges cost $25 [2]. Item five costs $7 [2].\n\n"
            "[1] https://p.example/permits\n[2] https://b.example/bulky\n")
    item = ReportItem(Report(task_id="t", agent="a", text=text), "Q")
    long_src = "Fridges are collected for $25 each.\n\n" + ("Filler paragraph without figures. " * 20 + "\n\n") * 6 + "Items go out by 7:00."
    chunks = split_chunks(long_src, 300)
    assert len(chunks) > 2 and "$25" in chunks[0] and "7:00" in chunks[-1]
    sources = {source_key("https://p.example/permits", None): Source("https://p.example/permits", "Permits", ["First vehicle $45."]),
               source_key("https://b.example/bulky", None): Source("https://b.example/bulky", "Bulky", chunks)}
    backend = ChoiceBackend(fake_judge_probs)
    (rec,) = judge_factuality(backend, CHOICE, [item], sources)
    (groups,) = backend.choice_calls
    assert len(groups) == 1 + len(chunks)  # one group per source chunk
    permits = groups[0].requests
    assert len(permits) == 2 and permits[0].prefill == '{"support": '
    body = permits[0].messages[0]["content"]
    assert body.index("First vehicle $45.") < body.index("Permits cost $45 a year.")  # source text before the claim
    assert prompt_parts(permits[1].messages[0]["content"])[1] == "Passes cost $15."
    c = rec.factuality.claims
    assert [s.support for cl in c for s in cl.sources] == [1, -1, 1, 1]
    assert c[2].sources[0].chunk == 0 and c[3].sources[0].chunk == len(chunks) - 1  # the chunk that holds the fact decides
    assert c[2].sources[0].chunks == len(chunks) and c[0].sources[0].expected == pytest.approx(0.8 - 0.1)
    assert rec.factuality.stats.mean_support == pytest.approx(0.5) and rec.factuality.stats.full_support_rate == 0.75


def test_factuality_generate_ungraded_and_unverifiable_kept_apart():
    text = "Permits cost $45 [1]. Passes cost $15 [2]. Cards are free [3].\n\n[1] https://p.example/a\n[2] https://p.example/gone\n"
    item = ReportItem(Report(task_id="t", agent="a", text=text), "Q")
    sources = {source_key("https://p.example/a", None): Source("https://p.example/a", "A", ["First vehicle $45."]),
               source_key("https://p.example/gone", None): Source("https://p.example/gone", failure="not_found: HTTP 404")}
    backend = ChoiceBackend(fake_judge_probs, texts=lambda req: "garbage")
    (rec,) = judge_factuality(backend, GEN, [item], sources)
    s = [cl.sources[0] for cl in rec.factuality.claims]
    assert [x.status for x in s] == ["ungraded", "unverifiable", "unverifiable"]
    assert s[1].failure == "not_found: HTTP 404" and s[2].failure.startswith("unresolved_reference: [3]")
    assert len(backend.generate_calls) == 2  # first try + one retry, only the one judgeable pair
    st = rec.factuality.stats
    assert (st.judged, st.unverifiable, st.ungraded, st.mean_support) == (0, 2, 1, None)


@pytest.mark.parametrize("text,expected", [('{"support": -1, "evidence": ""}', (-1, "")), ('{"support": "1", "evidence": "x"}', (1, "x")),
                                           ('```json\n{"support": 0}\n```', (0, ""))])
def test_parse_support(text, expected):
    assert parse_support(text) == expected


@pytest.mark.parametrize("text", ['{"support": 2}', '{"support": true}', "supported", '{"label": 1}'])
def test_parse_support_rejects(text):
    assert parse_support(text) is None
