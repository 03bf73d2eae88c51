"""Run configs: every shipped one validates, unknown keys are errors naming the field."""

from __future__ import annotations

import pytest

from lifesearch_local.cli import main
from lifesearch_local.errors import InputError
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.run.config import load_run_config
from serving.config import model_config
from tests.helpers.inputs import ROOT, SAMPLE

ALL = sorted((ROOT / "configs").glob("*.yaml"))
CURATE = [p for p in ALL if p.name.startswith("curate_")]  # `lifesearch curate` configs, not run configs
CONFIGS = [p for p in ALL if p not in CURATE]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_validate(path):
    cfg = load_run_config(path)
    assert cfg.all_judges() or cfg.agents


def test_unknown_keys_are_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\njudge:\n  id: j\n  model:\n    model: tiny-llama\n    temprature: 0.1\n")
    with pytest.raises(InputError, match=r"judge\.model\.temprature: Extra inputs are not permitted"):
        load_run_config(bad)


@pytest.mark.parametrize(("yaml", "where", "guess"), [
    ("agents:\n  - id: a\n    max_iteration: 3\n", "agents[0].max_iteration", "max_iterations"),
    ("judge:\n  model:\n    backend: hf\n    kernal: auto\n", "judge.model.kernal", "kernel"),
    ("judge:\n  model:\n    backend: vllm\n    model: m\n    enforce_eagre: true\n", "judge.model.enforce_eagre",
     "enforce_eager"),
    ("web:\n  serch: {}\n", "web.serch", "search"),
    ("tasks_ids: [a]\n", "tasks_ids", "task_ids"),
])
def test_a_misspelt_key_gets_did_you_mean(tmp_path, yaml, where, guess):
    """Found in use: `max_iteration` got "Extra inputs are not permitted" and no hint."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml)
    with pytest.raises(InputError) as e:
        load_run_config(bad)
    assert str(e.value).startswith(f"{bad}: {where}: Extra inputs are not permitted")
    assert str(e.value).endswith(f"; did you mean {guess!r}?")


def test_an_unknown_key_with_nothing_close_gets_no_guess(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents:\n  - id: a\n    colour: blue\n")
    with pytest.raises(InputError) as e:
        load_run_config(bad)
    assert str(e.value).endswith("colour: Extra inputs are not permitted")


def test_the_tiny_sweep_uses_the_ids_judge_derives():
    # `lifesearch judge --model tiny-llama` and the sweep record the same judge under one id

    judges = load_run_config(ROOT / "configs" / "sweep_tiny.yaml").all_judges()
    assert [j.id for j in judges] == [JudgeConfig(model=model_config(model=j.model.model)).id for j in judges]
    assert all(j.derived and j.id.startswith(f"{j.model.model}/choice/") for j in judges)


JUDGE = ["judge", "--tasks", str(SAMPLE / "tasks.jsonl"), "--reports", str(SAMPLE / "reports.jsonl")]


@pytest.mark.parametrize(("yaml", "where"), [
    ("judge:\n  id: j\n  mdoe: choice\n", "judge.mdoe"),
    ("judge:\n  id: j\nagents:\n  - id: a\n    max_token: 5\n", "agents[0].max_token"),
    ("judges:\n  - id: j\n  - id: k\n    runz: 2\n", "judges[1].runz"),
    ("id: j\nmdoe: choice\n", "mdoe"),  # a bare judge config
])
def test_judge_config_is_validated_whole_with_block_paths(tmp_path, capsys, yaml, where):
    cfg = tmp_path / "j.yaml"
    cfg.write_text(yaml)
    out = tmp_path / "o"
    assert main([*JUDGE, "--config", str(cfg), "--out", str(out)]) == 2
    assert f"{cfg}: {where}: Extra inputs are not permitted" in capsys.readouterr().err
    assert not out.exists()


def test_shipped_configs_are_valid_run_configs():
    cpu = load_run_config(ROOT / "configs" / "cpu_small.yaml")
    assert cpu.ray.replicas == 2 and cpu.ray.address is None and cpu.judge.model.device == "cpu"
    gpu = load_run_config(ROOT / "configs" / "single_gpu.yaml")
    assert gpu.ray.replicas == 1 and gpu.judge.model.backend == "vllm"
    assert load_run_config(ROOT / "configs" / "cluster.yaml").ray.address == "auto"
    ids = [j.id for j in load_run_config(ROOT / "configs" / "judges.yaml").judges]
    assert len(ids) == len(set(ids)) >= 7


@pytest.mark.parametrize(("yaml", "field"), [("runs: 1000000000\n", "runs"),
                                             ("judge: {id: j, runs: 1001}\n", "judge.runs")])
def test_runs_past_the_stated_limit_are_refused_in_one_line(tmp_path, yaml, field):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\n" + yaml)
    with pytest.raises(InputError) as e:
        load_run_config(path)
    assert str(e.value) == f"{path}: {field}: Input should be less than or equal to 1000"


def test_the_command_lines_runs_are_bounded_too(capsys):
    with pytest.raises(SystemExit) as e:
        main(["judge", "--tasks", str(SAMPLE / "tasks.jsonl"), "--reports", str(SAMPLE / "reports.jsonl"),
              "--out", "unused", "--runs", "1000000000", "--dry-run"])
    assert e.value.code == 2 and "argument --runs: at most 1,000 runs, got 1,000,000,000" in capsys.readouterr().err
