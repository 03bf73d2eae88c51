"""`run_pipeline` opens its run directory as every command does (`open_run`): locked as the command, sources hashed."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from doubles import ScriptedBackend

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.run.config import RunConfig
from lifesearch_local.run.pipeline import run_pipeline
from lifesearch_local.rundir.lock import LOCK_FILE
from lifesearch_local.rundir.manifest import sha256_file
from serving.config import model_config

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample"


def judge_only(tmp_path: Path) -> RunConfig:
    """The sample reports judged by a scripted judge: no agent, labels given."""
    return RunConfig(name="open-run", out=str(tmp_path / "run"), tasks=str(SAMPLE / "tasks.jsonl"),
                     task_ids=["sample-en-02"], reports=str(SAMPLE / "reports.jsonl"), labels=str(SAMPLE / "labels.jsonl"),
                     judge=JudgeConfig(id="j", model=model_config(model="judge-model")))


@contextlib.contextmanager
def scripted(model_cfg, ray_cfg):
    yield ScriptedBackend()


@contextlib.contextmanager
def broken_k(model_cfg, ray_cfg):
    """Judge model `k-model` fails to load; the others are scripted."""
    if model_cfg.model == "k-model":
        raise RuntimeError("the judge model did not load")
    yield ScriptedBackend()


def test_the_run_directory_is_locked_as_the_command_and_its_sources_are_hashed(tmp_path):
    cfg = judge_only(tmp_path)
    result = run_pipeline(cfg, command="demo", open_model=scripted, show=False)
    run = Path(result.run_dir)
    manifest = json.loads((run / "manifest.json").read_text())
    for name, src in (("tasks_source", cfg.tasks), ("reports_source", cfg.reports), ("labels_source", cfg.labels)):
        assert manifest["hashes"][name] == sha256_file(src)
        assert manifest["inputs"][name] == str(Path(src).resolve())
    assert manifest["hashes"]["tasks"] == sha256_file(run / "tasks.jsonl")  # the run's own copy, filtered
    assert json.loads((run / LOCK_FILE).read_text())["command"] == "demo"
    assert result.scores and (run / "judgments.jsonl").is_file()


def test_a_first_run_that_fails_leaves_no_directory_unless_it_wrote_work(tmp_path):
    cfg = judge_only(tmp_path).model_copy(update={"judge": JudgeConfig(id="k", model=model_config(model="k-model"))})
    with pytest.raises(RuntimeError, match="did not load"):
        run_pipeline(cfg, open_model=broken_k, show=False)
    assert not Path(cfg.out_dir()).exists()  # a rerun must not take a half-written directory for progress
    cfg = cfg.model_copy(update={"judge": JudgeConfig(id="j", model=model_config(model="judge-model")),
                                 "judges": [JudgeConfig(id="k", model=model_config(model="k-model"))]})
    with pytest.raises(RuntimeError, match="did not load"):  # judge j wrote its judgments, then k failed
        run_pipeline(cfg, open_model=broken_k, show=False)
    assert (Path(cfg.out_dir()) / "judgments.jsonl").is_file()
