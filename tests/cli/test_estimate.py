"""`lifesearch estimate`, `run --dry-run`, `judge --dry-run`: the JSON fields, a calibration kept as a profile, nothing run."""

from __future__ import annotations

import json

import pytest
import yaml

from lifesearch_local.estimate import calibrate
from tests.helpers.cli import run_cli
from tests.helpers.inputs import SAMPLE


@pytest.fixture
def profiles(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # `estimate` sets it for the process: undone after the test
    d = tmp_path / "profiles"
    monkeypatch.setattr(calibrate, "cache_dir", lambda: d)
    return d


def judge_config(tmp_path) -> str:
    cfg = {"name": "est", "out": str(tmp_path / "run"), "tasks": str(SAMPLE / "tasks.jsonl"), "task_ids": ["sample-en-01"],
           "reports": str(SAMPLE / "reports.jsonl"),
           "judge": {"id": "tiny", "model": {"backend": "hf", "model": "tiny-llama", "device": "cpu"}}}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_estimate_calibrates_once_and_prints_the_fields(tmp_path, profiles, capsys):
    config = judge_config(tmp_path)
    code, out, err = run_cli(["estimate", "--config", config, "--json"], capsys)
    assert code == 0, err
    est = json.loads(out)
    judge = est["phases"]["judge/tiny"]
    assert judge["decisions"] == judge["decisions_per_repetition"][0] > 0 and judge["tokens"] > 0
    assert 0 < judge["seconds"]["low"] <= judge["seconds"]["estimate"] <= judge["seconds"]["high"]
    assert est["total_seconds"] > judge["seconds"]["estimate"] and est["gpu_hours"] == 0
    assert est["memory"]["needed_gib"] > 0 and est["memory"]["fits"] is True and est["memory"]["free_gib"] > 0
    assert "calibrated now" in judge["basis"] and len(list(profiles.glob("*.json"))) == 2  # engine + session
    assert not (tmp_path / "run").exists()
    # the stored profile answers the next estimate: no model loaded, the same figures
    code, out, _ = run_cli(["estimate", "--config", config, "--json", "--no-calibrate"], capsys)
    again = json.loads(out)
    basis = again["phases"]["judge/tiny"]["basis"]
    assert basis.startswith(f"stored profile {profiles}/") and ".json measured 20" in basis  # where it lives, when
    assert again["phases"]["judge/tiny"]["seconds"] == judge["seconds"] and again["total_seconds"] == est["total_seconds"]


def test_dry_runs_print_the_work_and_write_nothing(tmp_path, profiles, capsys):
    config = judge_config(tmp_path)
    code, out, err = run_cli(["run", "--config", config, "--dry-run", "--no-calibrate"], capsys)
    assert code == 0, err
    assert "judge/tiny" in out and "decisions" in out and "total: unknown" in out
    assert not (tmp_path / "run").exists()
    code, out, err = run_cli(["judge", "--tasks", str(SAMPLE / "tasks.jsonl"), "--reports", str(SAMPLE / "reports.jsonl"),
                              "--model", "tiny-llama", "--out", str(tmp_path / "j"), "--limit", "1", "--runs", "2",
                              "--dry-run", "--no-calibrate"], capsys)
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("judge/"))
    assert " decisions (" in line  # two repetitions, each counted
    assert not (tmp_path / "j").exists()


def test_judge_dry_run_counts_only_the_chosen_tasks(tmp_path, profiles, capsys):
    def decisions(extra: list[str]) -> tuple[int, str]:
        code, out, err = run_cli(["judge", "--tasks", str(SAMPLE / "tasks.jsonl"), "--reports",
                                  str(SAMPLE / "reports.jsonl"), "--model", "tiny-llama", "--out", str(tmp_path / "j"),
                                  *extra, "--dry-run", "--no-calibrate"], capsys)
        assert code == 0, err
        line = next(ln for ln in out.splitlines() if ln.startswith("judge/"))
        return int(line.split(" decisions")[0].split()[-1].replace(",", "")), out

    everything, _ = decisions([])
    one, out = decisions(["--task-ids", "sample-en-01"])
    assert "--task-ids: judging 1 of" in out
    assert 0 < one < everything


def test_a_config_nested_100k_deep_is_one_line(tmp_path, capsys):
    cfg = tmp_path / "deep.yaml"
    cfg.write_text("judge: " + "[" * 100_000 + "]" * 100_000 + "\n")
    code, _, err = run_cli(["estimate", "--config", str(cfg)], capsys)
    assert code == 2 and err.strip().splitlines() == [
        f"error: {cfg}: nested deeper than a config can be (at most 64 levels)"]


def test_a_gpu_config_on_this_cpu_answers_with_numbers_and_names_its_device(tmp_path, monkeypatch, capsys):
    from lifesearch_local.estimate import cost, dry_run

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the command sets it: no hub call, no retry loop
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for module in (cost, dry_run):  # as on a machine without a GPU
        monkeypatch.setattr(module, "_cuda", lambda: False)
    code, out, err = run_cli(["estimate", "--config", "configs/single_gpu.yaml", "--out", str(tmp_path / "r"), "--json"],
                             capsys)
    assert code == 0, err
    est = json.loads(out)
    assert est["device"]["device"] == "h100" and est["total_seconds"] > 0 and est["gpu_hours"] > 0
    assert "Retry" not in err
    code, out, err = run_cli(["estimate", "--config", "configs/single_gpu.yaml", "--out", str(tmp_path / "r"),
                              "--device", "rtx4090", "--mfu", "0.5"], capsys)
    assert code == 0, err
    assert "device assumed for GPU phases: NVIDIA GeForce RTX 4090 24GB (165.2 TFLOP/s bf16 dense" in out
    assert "0.5 of peak for prompts" in out and "unknown" not in out
    code, _, err = run_cli(["estimate", "--config", "configs/single_gpu.yaml", "--device", "tpu"], capsys)
    assert code == 2 and err.strip().splitlines() == [
        "error: --device 'tpu': not a known GPU; known: h100, h100-pcie, h100-nvl, h200, a100-40, a100-80, l40s, "
        "a10, l4, rtx4090"]
    with pytest.raises(SystemExit) as e:
        run_cli(["estimate", "--config", "configs/single_gpu.yaml", "--mfu", "1.5"], capsys)
    assert e.value.code == 2 and "not a share of the peak in (0, 1]" in capsys.readouterr().err
