"""vLLM on a GPU: load a small model, score judge choices, agree with the hf backend; generate.

The model is the local path in LIFESEARCH_GPU_MODEL, else the locally built tiny-llama.
Run on a GPU machine: `pytest -q tests/gpu` (needs `pip install -e ".[vllm]"`).
"""

from __future__ import annotations

import gc
import os

import pytest

pytestmark = pytest.mark.gpu
vllm = pytest.importorskip("vllm")

from lifesearch_local.judge.rubric import CHOICES, PREFILL, judge_prompt  # noqa: E402
from lifesearch_local.llm.models import tiny_model_dir  # noqa: E402
from lifesearch_local.resources import resource_path  # noqa: E402
from lifesearch_local.tasks import load_tasks  # noqa: E402
from serving.config import model_config  # noqa: E402
from serving.protocol import ChatRequest, ChoiceGroup, ChoiceRequest  # noqa: E402

MAX_DP = 2e-2  # bf16 in both engines, different kernels


def model_path() -> str:
    return os.environ.get("LIFESEARCH_GPU_MODEL") or str(tiny_model_dir("tiny-llama"))


def groups() -> list[ChoiceGroup]:
    tasks = load_tasks(resource_path("data", "sample", "tasks.jsonl"))
    return [ChoiceGroup(key=t.id, requests=[
        ChoiceRequest(messages=[{"role": "user", "content": judge_prompt(t, r, f"A report about {t.question}")[0]}],
                      prefill=PREFILL) for r in t.rubrics[:6]])
        for t in (tasks[0], tasks[-1])]


@pytest.fixture(scope="module")
def hf_scores():
    import torch

    from serving.engines.hf import HFEngine

    hf = HFEngine(model_config(model=model_path(), device="cuda", dtype="bfloat16", kernel="single"))
    out = hf.score_choices(groups(), CHOICES)
    del hf
    gc.collect()
    torch.cuda.empty_cache()
    return out


@pytest.fixture(scope="module")
def engine():
    from serving.engines.vllm import VLLMEngine

    return VLLMEngine(model_config(backend="vllm", model=model_path(), dtype="bfloat16", gpu_memory_utilization=0.4,
                                   max_model_len=8192, enforce_eager=True))


def test_vllm_choice_scores_agree_with_hf(engine, hf_scores):
    got = engine.score_choices(groups(), CHOICES)
    diffs = [abs(a.probs[0] - b.probs[0]) for ga, gb in zip(hf_scores, got) for a, b in zip(ga, gb)]
    assert len(diffs) == 12 and max(diffs) <= MAX_DP, diffs
    assert all(abs(sum(r.probs) - 1) < 1e-6 for g in got for r in g)


def test_vllm_generates(engine):
    (g,) = engine.generate([ChatRequest(messages=[{"role": "user", "content": "Say hello."}], max_tokens=8)])
    assert 0 < g.output_tokens <= 8 and g.prompt_tokens > 3 and g.finish_reason in ("stop", "length")
