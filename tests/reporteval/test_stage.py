"""The ReportEval stage: factuality replayed by hand, resumed by key, settings kept with the records,
and the tiny random Llama offline on CPU."""

from __future__ import annotations

import json

import pytest

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.reporteval.config import ReportEvalConfig
from lifesearch_local.reporteval.records import ReportEvaluation
from lifesearch_local.reporteval.stage import RECORDS, SUMMARY, reporteval_stage
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.manifest import ConfigChanged
from serving.config import model_config
from tests.helpers.reporteval import (
    ChoiceBackend,
    fake_judge_probs,
    fake_support,
    items,
    web,
)

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


def test_reporteval_resume_with_other_settings_after_the_manifest_is_deleted_is_refused(tmp_path):
    rd = RunDir(tmp_path / "run")
    cfg = JudgeConfig(id="fake")
    reporteval_stage(rd, items(), cfg, ReportEvalConfig(seed=11, metrics=["redundancy"]), web(tmp_path),
                     ChoiceBackend(fake_judge_probs), show=False)
    rd.file("manifest.json").unlink()
    before = rd.file(RECORDS).read_bytes()
    with pytest.raises(ConfigChanged, match="as the records themselves say"):
        reporteval_stage(rd, items(), cfg, ReportEvalConfig(seed=12), web(tmp_path), ChoiceBackend(fake_judge_probs),
                         show=False)
    assert rd.file(RECORDS).read_bytes() == before
    # the same settings add the other metrics
    reporteval_stage(rd, items(), cfg, ReportEvalConfig(seed=11), web(tmp_path), ChoiceBackend(fake_judge_probs), show=False)
    assert len(rd.load(RECORDS, ReportEvaluation)) == 9


@pytest.mark.slow
def test_tiny_choice_all_metrics(tmp_path, tiny_backend):
    rd = RunDir(tmp_path / "run")
    cfg = JudgeConfig(id="tiny", model=model_config(model="tiny-llama", device="cpu"))
    res = reporteval_stage(rd, items(), cfg, ReportEvalConfig(), web(tmp_path), tiny_backend, show=False)
    recs = rd.load(RECORDS, ReportEvaluation)
    assert len(recs) == 9 and {r.metric for r in recs} == {"quality", "redundancy", "factuality"}
    for r in recs:
        if r.quality:
            for d in r.quality.dimensions:
                assert sum(d.probs) == pytest.approx(1.0) and 0 <= d.score <= 4 and d.label in range(5)
                assert d.score == pytest.approx(sum(k * p for k, p in enumerate(d.probs)))
        if r.redundancy:
            assert all(0 <= p.score <= 4 and len(p.probs) == 5 for p in r.redundancy.pairs)
        if r.factuality:
            for s in (s for c in r.factuality.claims for s in c.sources):
                assert s.status in ("judged", "unverifiable")
                assert (s.support in (1, 0, -1) and len(s.probs) == 3) if s.status == "judged" else s.failure
    f = res["summary"]["fx"]["factuality"]
    assert (f["pairs"], f["judged"], f["unverifiable"]) == (12, 9, 3)  # the same pairs as with the scripted judge
    assert res["stats"]["quality"]["decisions"] == 15 and tiny_backend.scorer.stats.decisions > 0


@pytest.mark.slow
def test_tiny_generate_quality_is_bounded(tmp_path, tiny_backend):
    rd = RunDir(tmp_path / "run")
    cfg = JudgeConfig(id="tiny-gen", mode="generate", retries=0, max_tokens=8)
    rcfg = ReportEvalConfig(metrics=["quality", "redundancy"], quality_max_tokens=8, max_pairs=2)
    reporteval_stage(rd, items()[:1], cfg, rcfg, web(tmp_path), tiny_backend, show=False)
    q, r = rd.load(RECORDS, ReportEvaluation)
    # A random model rarely writes valid JSON: whatever it wrote is kept, unparseable answers are ungraded.
    assert q.quality.raw is not None and all(d.score is None or 0 <= d.score <= 4 for d in q.quality.dimensions)
    assert r.redundancy.possible_pairs == 1 and len(r.redundancy.pairs) == 1  # Parking × Bulky items
    assert all(p.raw is not None for p in r.redundancy.pairs)
