"""The factuality metric against a scripted backend: grouped by source chunk, unverifiable kept apart, parsing."""

from __future__ import annotations

import pytest

from lifesearch_local.records import Report
from lifesearch_local.reporteval.factuality import judge_factuality, parse_support
from lifesearch_local.reporteval.items import ReportItem
from lifesearch_local.reporteval.sources import Source, source_key, split_chunks
from tests.helpers.reporteval import CHOICE, GEN, ChoiceBackend, fake_judge_probs, prompt_parts


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
