"""`lifesearch reporteval` offline with the tiny Llama: config sections, JSON output, a resumed run, metric names."""

from __future__ import annotations

import json

import pytest

from lifesearch_local.cli import main
from lifesearch_local.reporteval.records import ReportEvaluation
from lifesearch_local.reporteval.stage import RECORDS
from lifesearch_local.rundir.jsonl import read_records
from tests.helpers.reporteval import REPORTEVAL_FIXTURES, SAMPLE_TASKS

pytestmark = pytest.mark.slow


def test_cli_offline_with_config_sections(tmp_path, capsys):
    cfg = tmp_path / "re.yaml"
    cfg.write_text("judge:\n  id: tiny\n  model:\n    model: tiny-llama\n    device: cpu\n"
                   "reporteval:\n  seed: 7\n  max_pairs: 3\nweb:\n  concurrency: 4\n")
    out = tmp_path / "run"
    argv = ["reporteval", "--reports", str(REPORTEVAL_FIXTURES / "reports.jsonl"), "--tasks", str(SAMPLE_TASKS), "--config", str(cfg),
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
    argv = ["reporteval", "--reports", str(REPORTEVAL_FIXTURES / "reports.jsonl"), "--model", "tiny-llama", "--out", str(tmp_path),
            "--metrics", "quality,style"]
    assert main(argv) == 2 and "metrics" in capsys.readouterr().err
