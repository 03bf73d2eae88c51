"""The newcomer's path: setup failures are one line with the fix, exit 2, fast, and leave no run directory."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time

import pytest

from lifesearch_local.run.preflight import SetupError, preflight, weights_problem
from serving.config import RayConfig, model_config
from serving.engines.vllm_cpu import (
    GIB,
)
from tests.helpers.inputs import ROOT, SAMPLE


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket closes


def cli(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str, float]:
    """`lifesearch ARGV` in a fresh process (as a user runs it): rc, stdout, stderr, seconds."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "lifesearch_local", *argv], capture_output=True, text=True, cwd=ROOT,
                       timeout=120, env={**os.environ, **(env or {})})
    return r.returncode, r.stdout, r.stderr, time.perf_counter() - t0


def assert_setup_error(rc: int, err: str, seconds: float, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and seconds < 60  # no retry loop (the hub client's took minutes)
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture
def hub_offline(tmp_path):
    """An empty Hugging Face cache and a hub endpoint nobody answers on."""
    return {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
            "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}"}


JUDGE = ["judge", "--tasks", str(SAMPLE / "tasks.jsonl"), "--reports", str(SAMPLE / "reports.jsonl")]


def test_judge_with_a_hub_model_under_hf_hub_offline_fails_fast(tmp_path, hub_offline):
    out = tmp_path / "run"
    rc, _, err, s = cli(*JUDGE, "--model", "Qwen/Qwen3-0.6B", "--out", str(out), env={**hub_offline, "HF_HUB_OFFLINE": "1"})
    assert_setup_error(rc, err, s, "Qwen/Qwen3-0.6B", "not in the local Hugging Face cache", "HF_HUB_OFFLINE")
    assert not out.exists()  # no manifest.json a rerun would mistake for progress


def test_judge_with_a_hub_model_and_the_hub_unreachable_fails_fast(tmp_path, hub_offline):
    out = tmp_path / "run"
    rc, _, err, s = cli(*JUDGE, "--model", "Qwen/Qwen3-0.6B", "--out", str(out), env=hub_offline)
    assert_setup_error(rc, err, s, "cannot be reached", "hf download Qwen/Qwen3-0.6B")
    assert not out.exists()


def test_a_model_in_the_local_cache_passes_without_network(tmp_path, monkeypatch):
    from huggingface_hub import constants

    snap = tmp_path / "models--org--tiny" / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (tmp_path / "models--org--tiny" / "refs").mkdir()
    (tmp_path / "models--org--tiny" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert weights_problem("org/tiny") is None
    assert "HF_HUB_OFFLINE" in weights_problem("org/other")
    assert weights_problem("tiny-llama") is None and weights_problem(str(tmp_path)) is None


def test_a_misspelt_built_in_model_gets_did_you_mean(tmp_path, capsys):
    """Found in use: `--model tiny-lama` said only that it is no directory and no repo id."""
    from lifesearch_local.cli import main

    assert weights_problem("tiny-lama").endswith("(org/name); did you mean 'tiny-llama'?")
    assert weights_problem("smollm-135m").endswith("; did you mean 'smollm2-135m'?")
    assert "did you mean" not in weights_problem("gpt2")  # nothing close: no guess
    out = tmp_path / "j"
    assert main(["judge", "--tasks", str(SAMPLE / "tasks.jsonl"), "--reports", str(SAMPLE / "reports.jsonl"),
                 "--model", "tiny-lama", "--out", str(out)]) == 2
    assert "did you mean 'tiny-llama'?" in capsys.readouterr().err and not out.exists()


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_demo_on_cuda_without_cuda_fails_before_any_phase(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    out = tmp_path / "demo"
    rc, _, err, s = cli("demo", "--device", "cuda", "--out", str(out), "--quiet")
    assert_setup_error(rc, err, s, "device cuda", "no usable CUDA GPU", "--device cpu")
    assert not out.exists()


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_single_gpu_config_on_a_cpu_box_says_so_before_starting_ray(tmp_path, hub_offline):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = tmp_path / "sg"
    rc, _, err, s = cli("run", "--config", "configs/single_gpu.yaml", "--out", str(out),
                        env={**hub_offline, "HF_HUB_OFFLINE": "1"})
    # every problem in one go, each once for both roles: no GPU for Ray, no vLLM, no weights
    vllm = [] if importlib.util.find_spec("vllm") else ["(2) agent qwen3-8b-agent, judge qwen3-8b-choice: backend vllm",
                                                         "needs vLLM", "scripts/ci/vllm_cpu_env.sh"]
    assert_setup_error(rc, err, s, f"{3 if vllm else 2} problems: (1) agent qwen3-8b-agent, judge qwen3-8b-choice: "
                       "1 Ray replica(s) × 1 GPU", "has 0 GPU(s)", *vllm, "HF_HUB_OFFLINE")
    assert not out.exists()


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_single_gpu_config_without_ray_names_the_vllm_extra(tmp_path):
    from lifesearch_local.run.preflight import gpu_count

    out = tmp_path / "sg"
    rc, _, err, s = cli("run", "--config", "configs/single_gpu.yaml", "--out", str(out), "--no-ray")
    assert_setup_error(rc, err, s, "backend vllm", 'pip install -e ".[vllm]"')
    if gpu_count() == 0:  # the CPU route, first
        assert err.index("scripts/ci/vllm_cpu_env.sh") < err.index('pip install -e ".[vllm]"')
    assert not out.exists()


def test_preflight_groups_models_and_checks_ray_cpus(tmp_path):
    vllm = model_config(backend="vllm", model=str(tmp_path))  # a local model directory
    ray = RayConfig(replicas=3, num_cpus_per_replica=1, num_gpus_per_replica=0, num_cpus=2)
    with pytest.raises(SetupError, match=r"^judge j: 3 Ray replica\(s\) × 1 CPU .* has 2 CPU\(s\)"):
        preflight([("judge j", model_config(model="tiny-llama", device="cpu"))], ray)
    preflight([("judge j", model_config(model="tiny-llama", device="cpu"))], ray.model_copy(update={"replicas": 2}))
    preflight([("judge j", vllm)], RayConfig(address="ray://head:10001", num_gpus_per_replica=1))  # a joined cluster


def test_debug_shows_the_traceback(tmp_path, hub_offline):
    rc, _, err, _ = cli("--debug", *JUDGE, "--model", "Qwen/Qwen3-0.6B", "--out", str(tmp_path / "o"),
                        env={**hub_offline, "HF_HUB_OFFLINE": "1"})
    assert rc == 2 and "Traceback" in err and err.strip().splitlines()[-1].startswith("error: ")


@pytest.mark.parametrize("argv", [
    ["curate", "--queries", str(SAMPLE / "queries.jsonl"), "--model", "Qwen/Qwen3-0.6B"],
    ["reporteval", "--reports", str(SAMPLE / "reports.jsonl"), "--tasks", str(SAMPLE / "tasks.jsonl"),
     "--model", "Qwen/Qwen3-0.6B"],
])
def test_curate_and_reporteval_check_the_model_first(tmp_path, hub_offline, argv):
    out = tmp_path / "o"
    rc, _, err, s = cli(*argv, "--out", str(out), env={**hub_offline, "HF_HUB_OFFLINE": "1"})
    assert_setup_error(rc, err, s, "Qwen/Qwen3-0.6B", "HF_HUB_OFFLINE")
    assert not out.exists()


def test_preflight_refuses_a_cpu_vllm_whose_kv_cache_cannot_fit(monkeypatch):
    from lifesearch_local.llm.models import tiny_model_dir
    from lifesearch_local.run import preflight
    from serving.engines import vllm_cpu

    path = str(tiny_model_dir("tiny-llama"))
    monkeypatch.setattr(preflight, "cuda_available", lambda: False)
    monkeypatch.setattr(vllm_cpu, "free_memory", lambda: 1024)
    problem = preflight.vllm_cpu_problem(model_config(backend="vllm", model=path))
    assert problem is not None and "set kv_cache_gib" in problem
    assert preflight.vllm_cpu_problem(model_config(backend="vllm", model=path, kv_cache_gib=1)) is None
    monkeypatch.setattr(vllm_cpu, "free_memory", lambda: 64 * GIB)
    assert preflight.vllm_cpu_problem(model_config(backend="vllm", model=path)) is None


def test_a_dry_run_prices_a_gpu_model_this_machine_lacks_instead_of_refusing_it(tmp_path, monkeypatch):
    """A login node before `sbatch` has no GPU: `judge --dry-run` prices a GPU judge on a stated GPU, so the
    missing GPU is no problem for it; a real run still refuses it in one line, and a CPU model's problems stay
    problems in a dry run."""
    from lifesearch_local.estimate import cost
    from lifesearch_local.run import preflight as pre

    monkeypatch.setattr(cost, "_cuda", lambda: False)
    monkeypatch.setattr(pre, "cuda_available", lambda: False)
    gpu = model_config(model=str(tmp_path), device="cuda")
    with pytest.raises(SetupError, match="no usable CUDA GPU"):
        preflight([("judge j", gpu)])
    preflight([("judge j", gpu)], dry_run=True)  # priced on an assumed GPU: nothing to refuse here
    cpu = model_config(model=str(tmp_path / "absent"), device="cpu")
    with pytest.raises(SetupError, match="judge c"):
        preflight([("judge c", cpu)], dry_run=True)
