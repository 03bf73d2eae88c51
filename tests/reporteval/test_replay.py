"""Factuality against sources served from the bundled corpus and the web cache in replay mode; resume."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Report
from lifesearch_local.reporteval.config import ReportEvalConfig
from lifesearch_local.reporteval.records import ReportEvaluation
from lifesearch_local.reporteval.sources import fetch_sources, source_key
from lifesearch_local.reporteval.stage import RECORDS, SUMMARY, report_items, reporteval_stage
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from lifesearch_local.web.cache import WebCache, page_key
from lifesearch_local.web.config import WebConfig
from lifesearch_local.web.records import Document

from .conftest import CORPUS, FIXTURES, SAMPLE_TASKS, ChoiceBackend, fake_judge_probs, fake_support

PERMITS = "https://wexmoor.example/services/parking/residential-permits"
LATER = "https://wexmoor.example/news/2026-08-12-council-approves-parking-fees"


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to reach the network fails the test."""

    async def refuse(self, url, **kw):
        raise AssertionError(f"network fetch attempted: {url}")

    monkeypatch.setattr("lifesearch_local.web.http.HttpClient.get", refuse)


def web(tmp_path) -> WebConfig:
    return WebConfig(mode="replay", cache_dir=tmp_path / "cache", corpus_dirs=[CORPUS])


def items():
    return report_items(read_records(FIXTURES / "reports.jsonl", Report), load_tasks(SAMPLE_TASKS))


def test_fetch_sources_corpus_cache_asof_and_misses(tmp_path):
    cached_url = "https://news.example/cached-story"
    doc = Document(url=cached_url, final_url=cached_url, title="Cached", text="A cached page with 42 in it.",
                   content_type="text/html", status=200, bytes=30, fetched_at="2026-01-01T00:00:00+00:00",
                   cache_key=page_key(cached_url, None))
    WebCache(tmp_path / "cache").put_page(page_key(cached_url, None), cached_url, None, doc, b"<p>A cached page with 42 in it.</p>")
    cutoff = dt.date(2026, 7, 20)
    wanted = [(PERMITS, cutoff), (PERMITS + "#fees", cutoff), (LATER, cutoff), (LATER, None), (cached_url, None),
              ("https://never.example/x", None)]
    got, stats = fetch_sources(web(tmp_path), wanted, budget=6000)
    assert len(got) == 5  # the fragment is the same page
    assert "$45 per year" in got[source_key(PERMITS, cutoff)].chunks[0]
    assert got[source_key(LATER, cutoff)].failure.startswith("after_cutoff:")  # dated 2026-08-12, after the task's cutoff
    assert got[source_key(LATER, None)].failure is None  # no cutoff: served
    assert got[source_key(cached_url, None)].chunks == ["A cached page with 42 in it."]
    assert got[source_key("https://never.example/x", None)].failure.startswith("replay_miss:")
    assert stats["corpus"] == 2 and stats["cached"] == 1 and stats["live"] == 0


EXPECTED = {  # by claim, per cited source, from the fixture reports and the corpus pages (fake judge: numbers)
    "sample-en-01": [[1], [1, -1], [1], ["after_cutoff"], ["unresolved_reference"], [0]],
    "sample-en-03": [[1], [1], ["replay_miss"]],
    "sample-zh-03": [[1], [0]],
}


def outcome(rec: ReportEvaluation) -> list[list]:
    return [[s.support if s.status == "judged" else s.failure.split(":")[0] for s in c.sources] for c in rec.factuality.claims]


@pytest.mark.parametrize("mode", ["choice", "generate"])
def test_factuality_stage_replay_by_hand(tmp_path, mode):
    backend = ChoiceBackend(fake_judge_probs, texts=lambda req: json.dumps({"support": fake_support(req.messages[0]["content"])}))
    rd = RunDir(tmp_path / "run")
    cfg = JudgeConfig(id="fake", mode=mode)
    res = reporteval_stage(rd, items(), cfg, ReportEvalConfig(metrics=["factuality"]), web(tmp_path), backend, show=False)
    recs = {r.task_id: r for r in rd.load(RECORDS, ReportEvaluation)}
    assert {k: outcome(r) for k, r in recs.items()} == EXPECTED
    s = res["summary"]["fx"]["factuality"]
    # judged labels 1,1,−1,1,0 | 1,1 | 1,0 → mean 5/9, full 6/9; unverifiable 3 of 12 pairs, kept apart
    assert s["mean_support"] == pytest.approx(5 / 9) and s["full_support_rate"] == pytest.approx(6 / 9)
    assert (s["pairs"], s["judged"], s["unverifiable"], s["claims"]) == (12, 9, 3, 11)
    assert s["unverifiable_share"] == pytest.approx(0.25) and s["claims_per_report"] == pytest.approx(11 / 3)
    assert json.loads(rd.file(SUMMARY).read_text())["fake"]["fx"]["factuality"]["pairs"] == 12
    st = res["stats"]["factuality"]
    assert st["sources"] == 6 and st["sources_unavailable"] == 2 and st["fetch"]["live"] == 0


def test_stage_resumes_by_key_without_duplicates(tmp_path):
    backend = ChoiceBackend(fake_judge_probs)
    rd = RunDir(tmp_path / "run")
    cfg, rcfg = JudgeConfig(id="fake"), ReportEvalConfig(seed=11)
    reporteval_stage(rd, items(), cfg, rcfg, web(tmp_path), backend, show=False)
    lines = rd.file(RECORDS).read_text().splitlines()
    assert len(lines) == 9 and len(backend.choice_calls) == 3
    rd.file(RECORDS).write_text("\n".join(lines[:-2]) + "\n" + lines[-2][:40])  # a kill: one lost, one torn line
    reporteval_stage(rd, items(), cfg, rcfg, web(tmp_path), backend, show=False)
    recs = rd.load(RECORDS, ReportEvaluation)
    assert len(recs) == 9 and len({r.key for r in recs}) == 9
    assert len(backend.choice_calls) == 4  # only the factuality batch ran again
    reporteval_stage(rd, items(), cfg, rcfg, web(tmp_path), backend, show=False)
    assert len(backend.choice_calls) == 4 and len(rd.load(RECORDS, ReportEvaluation)) == 9
    m = rd.manifest()
    assert m.seeds["reporteval/redundancy"] == 11 and "prompts/reporteval_factuality" in m.hashes
