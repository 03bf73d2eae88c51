"""Issue 24, break 3 for ReportEval: settings live with the records, so a lost manifest cannot mix them."""

from __future__ import annotations

import pytest

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.reporteval.config import ReportEvalConfig
from lifesearch_local.reporteval.records import ReportEvaluation
from lifesearch_local.reporteval.stage import RECORDS, reporteval_stage
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.manifest import ConfigChanged

from .conftest import ChoiceBackend, fake_judge_probs
from .test_replay import items, web


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    async def refuse(self, url, **kw):
        raise AssertionError(f"network fetch attempted: {url}")

    monkeypatch.setattr("lifesearch_local.web.http.HttpClient.get", refuse)


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
