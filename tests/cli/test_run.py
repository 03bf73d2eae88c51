"""`lifesearch run` and `lifesearch agent`: registered, and the config's tasks honoured."""

from __future__ import annotations

from pathlib import Path

import pytest

import lifesearch_local.run.pipeline as pipeline
from lifesearch_local.cli import build_parser, main
from tests.helpers.inputs import ROOT


@pytest.fixture
def seen(monkeypatch):
    """Replace the pipeline: record the RunConfig and phases the command would run."""
    calls = []

    def fake(cfg, show=True, phases=pipeline.PHASES, **kw):
        calls.append((cfg, phases))
        return pipeline.PipelineResult(run_dir=Path(cfg.out_dir()))

    monkeypatch.setattr(pipeline, "run_pipeline", fake)
    return calls


def test_agent_keeps_the_configs_task_ids(seen, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["agent", "--config", "configs/cpu_small.yaml", "--out", str(tmp_path / "a"), "--quiet"]) == 0
    cfg, phases = seen[-1]
    assert cfg.task_ids == ["sample-en-01", "sample-zh-04"] and cfg.tasks == "data/sample/tasks.jsonl"
    assert phases == ("agent",)
    other = tmp_path / "tasks.jsonl"
    other.write_text((ROOT / "data" / "sample" / "tasks.jsonl").read_text())
    assert main(["agent", "--config", "configs/cpu_small.yaml", "--tasks", str(other), "--out", str(tmp_path / "b"),
                 "--runs", "2", "--quiet"]) == 0
    cfg, _ = seen[-1]
    assert cfg.tasks == str(other) and cfg.task_ids == ["sample-en-01", "sample-zh-04"] and cfg.runs == 2


def test_the_run_command_is_registered():
    args = build_parser().parse_args(["run", "--config", "configs/cpu_small.yaml", "--no-ray"])
    assert args.no_ray and args.func.__module__ == "lifesearch_local.cli.run"
