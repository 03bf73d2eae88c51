"""The stage and the CLI with the tiny random Llama (serving.engines.hf through host_engine), offline on CPU."""

from __future__ import annotations

import json

import pytest

from lifesearch_local.cli import main
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Report
from lifesearch_local.reporteval.config import ReportEvalConfig
from lifesearch_local.reporteval.records import ReportEvaluation
from lifesearch_local.reporteval.stage import RECORDS, report_items, reporteval_stage
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from lifesearch_local.web.config import WebConfig
from serving.config import model_config

from .conftest import CORPUS, FIXTURES, SAMPLE_TASKS

pytestmark = pytest.mark.slow


def items():
    return report_items(read_records(FIXTURES / "reports.jsonl", Report), load_tasks(SAMPLE_TASKS))


def web(tmp_path) -> WebConfig:
    return WebConfig(mode="replay", cache_dir=tmp_path / "cache", corpus_dirs=[CORPUS])


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


def test_cli_offline_with_config_sections(tmp_path, capsys):
    cfg = tmp_path / "re.yaml"
    cfg.write_text("judge:\n  id: tiny\n  model:\n    model: tiny-llama\n    device: cpu\n"
                   "reporteval:\n  seed: 7\n  max_pairs: 3\nweb:\n  concurrency: 4\n")
    out = tmp_path / "run"
    argv = ["reporteval", "--reports", str(FIXTURES / "reports.jsonl"), "--tasks", str(SAMPLE_TASKS), "--config", str(cfg),
            "--out", str(out), "--metrics", "redundancy,factuality", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["tiny"]["summary"]["fx"]) == {"redundancy", "factuality"}
    assert data["tiny"]["stats"]["web_mode"] == "replay" and data["tiny"]["summary"]["fx"]["factuality"]["unverifiable"] == 3
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seeds"]["reporteval/redundancy"] == 7 and "reports" in manifest["hashes"]
    assert all(len(r.redundancy.pairs) <= 3 for r in read_records(out / RECORDS, ReportEvaluation) if r.redundancy)
    assert main(argv[:-1] + ["--quiet"]) == 0  # resumed: nothing left, the table is printed again
    assert "fx" in capsys.readouterr().out


def test_cli_rejects_unknown_metric(tmp_path, capsys):
    argv = ["reporteval", "--reports", str(FIXTURES / "reports.jsonl"), "--model", "tiny-llama", "--out", str(tmp_path),
            "--metrics", "quality,style"]
    assert main(argv) == 2 and "metrics" in capsys.readouterr().err
