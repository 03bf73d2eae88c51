"""Every shipped config validates, and unknown keys are rejected with the field named."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifesearch_local.errors import InputError
from lifesearch_local.run.config import load_run_config

ALL = sorted((Path(__file__).resolve().parent.parent / "configs").glob("*.yaml"))
CURATE = [p for p in ALL if p.name.startswith("curate_")]  # `lifesearch curate` configs, not run configs
CONFIGS = [p for p in ALL if p not in CURATE]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_validate(path):
    cfg = load_run_config(path)
    assert cfg.all_judges() or cfg.agents


@pytest.mark.parametrize("path", CURATE, ids=lambda p: p.name)
def test_shipped_curate_configs_validate(path):
    from lifesearch_local.curate.config import load_curate_config

    assert load_curate_config(path).model.model


def test_unknown_keys_are_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\njudge:\n  id: j\n  model:\n    model: tiny-llama\n    temprature: 0.1\n")
    with pytest.raises(InputError, match=r"judge\.model\.temprature: Extra inputs are not permitted"):
        load_run_config(bad)


def test_the_tiny_sweep_uses_the_ids_judge_derives():
    # `lifesearch judge --model tiny-llama` and the sweep record the same judge under one id
    from lifesearch_local.judge.config import JudgeConfig
    from serving.config import model_config

    judges = load_run_config(Path(__file__).resolve().parent.parent / "configs" / "sweep_tiny.yaml").all_judges()
    assert [j.id for j in judges] == [JudgeConfig(model=model_config(model=j.model.model)).id for j in judges]
    assert all(j.derived and j.id.startswith(f"{j.model.model}/choice/") for j in judges)
