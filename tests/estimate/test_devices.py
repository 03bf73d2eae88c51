"""The analytic estimate's assumptions: GPU profiles, model shapes known without a download, a phase's time."""

from __future__ import annotations

import pytest

from lifesearch_local.errors import LifesearchError
from lifesearch_local.estimate.devices import (
    BANDWIDTH_USE,
    DEVICES,
    GB,
    LOAD_BYTES_PER_S,
    OPEN_FIXED_S,
    GpuAssumption,
    analytic_seconds,
    device,
    known_arch,
)
from lifesearch_local.estimate.plan import AgentWork, PhasePlan
from lifesearch_local.estimate.work import Arch, Pass, Shape, Unit
from serving.config import model_config


def test_the_table_holds_the_common_gpus_with_their_datasheet_figures():
    assert {"h100", "h100-pcie", "h200", "a100-40", "a100-80", "l40s", "a10", "rtx4090"} <= set(DEVICES)
    assert (DEVICES["h100"].bf16_tflops, DEVICES["h100"].bandwidth_gbs, DEVICES["h100"].memory_gb) == (989.4, 3350, 80)
    assert (DEVICES["a100-80"].bf16_tflops, DEVICES["a100-80"].bandwidth_gbs) == (312.0, 2039)
    assert DEVICES["h200"].memory_gib == 131.3  # 141 GB in GiB
    assert device("H100_PCIe") is DEVICES["h100-pcie"]
    with pytest.raises(LifesearchError, match=r"--device 'b200': not a known GPU; known: h100, "):
        device("b200")


def test_the_configs_models_are_known_with_their_parameter_counts():
    arch, ctx = known_arch("Qwen/Qwen3-8B")
    # the model card's 8,190,735,360 less its norms (36 × (2 × 4096 + 2 × 128) + 4096 = 308,224), which are not counted
    assert ctx == 40960 and arch.params == 8_190_735_360 - 308_224
    assert known_arch("/models/hub/Qwen3-32B")[0].layers == 64  # a local copy named like the hub id
    gpt = known_arch("openai/gpt-oss-20b")[0]
    assert round(gpt.params / 1e9, 1) == 20.9 and round(gpt.linear_params / 1e9, 2) == 3.03  # 32 experts, 4 a token
    assert known_arch("someone/unknown-7b") is None


def _shape(arch: Arch) -> Shape:
    return Shape(tokenizer=None, arch=arch, limit=4096, device="cuda", form="vllm", dtype_bytes=2)


ARCH = Arch(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=1000, tied=True)


def test_a_judge_phase_is_its_flops_at_the_utilisation_plus_opening_the_engine():
    plan = PhasePlan("judge/j", "judge", model_config(backend="vllm", model="m"), decisions=4, requests=4,
                     calls=[[Unit(flops=3e15, tokens=10, prompt_tokens=10, cost=1.0, rows=4)]])
    gpu = GpuAssumption("h100", 0.3)
    lo, mid, hi = analytic_seconds(plan, _shape(ARCH), gpu, replicas=1)
    weights = ARCH.params * 2
    peak = 989.4e12
    assert mid == pytest.approx(OPEN_FIXED_S[1] + weights / LOAD_BYTES_PER_S[1] + 3e15 / (peak * 0.3), abs=0.01)
    assert lo == pytest.approx(OPEN_FIXED_S[0] + weights / LOAD_BYTES_PER_S[0] + 3e15 / (peak * 0.45), abs=0.01)
    assert hi == pytest.approx(OPEN_FIXED_S[2] + weights / LOAD_BYTES_PER_S[2] + 3e15 / (peak * 0.15), abs=0.01)
    two = analytic_seconds(plan, _shape(ARCH), gpu, replicas=2)[1]
    assert two == pytest.approx(mid - 3e15 / (peak * 0.3) / 2, abs=0.01)  # replicas share the work, each opens
    idle = PhasePlan("judge/j", "judge", model_config(backend="vllm", model="m"))
    assert analytic_seconds(idle, _shape(ARCH), gpu, replicas=1) == (0.0, 0.0, 0.0)


def test_an_agent_phase_decodes_at_the_bandwidth():
    big = Arch(layers=36, hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=12288, vocab=151936, tied=False)
    work = AgentWork(calls_per_run=(1, 2, 4), output_tokens=(10, 100, 100), parallel=2,
                     first=[Unit(flops=0.0, tokens=0, prompt_tokens=1000, cost=1.0)] * 4)
    plan = PhasePlan("agent/a", "agent", model_config(backend="vllm", model="m"), runs=4, agent=work)
    mid = analytic_seconds(plan, _shape(big), GpuAssumption("a100-80", 0.35), replicas=1)[1]
    d = DEVICES["a100-80"]
    kv = 2 * big.kv_bytes_per_token(2) * (1000 + 50)
    step = (big.params * 2 + kv) / (d.bandwidth_gbs * GB * BANDWIDTH_USE)  # bandwidth-bound at a batch of 2
    prefill = 2 * big.flops(Pass(1, 1000, 0, 1)) / (d.bf16_tflops * 1e12 * 0.35)
    opened = OPEN_FIXED_S[1] + big.params * 2 / LOAD_BYTES_PER_S[1]
    assert mid == pytest.approx(opened + 2 * 2 * (prefill + 100 * step), abs=0.01)  # 2 waves × 2 calls (rounded)


def test_tensor_parallel_gpus_share_a_replicas_work():
    calls = [[Unit(flops=6e15, tokens=10, prompt_tokens=10, cost=1.0, rows=4)]]
    one = PhasePlan("judge/j", "judge", model_config(backend="vllm", model="m"), requests=4, calls=calls)
    two = PhasePlan("judge/j", "judge", model_config(backend="vllm", model="m", tensor_parallel_size=2), requests=4,
                    calls=calls)
    gpu = GpuAssumption("h100", 0.3)
    compute = 6e15 / (989.4e12 * 0.3)
    assert analytic_seconds(one, _shape(ARCH), gpu, 1)[1] - analytic_seconds(two, _shape(ARCH), gpu, 1)[1] == \
        pytest.approx(compute / 2, abs=0.02)
