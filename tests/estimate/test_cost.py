"""The estimate's arithmetic: a phase's seconds from its calls and a profile, the range, memory, actual vs estimate."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lifesearch_local.estimate.calibrate import EngineProfile
from lifesearch_local.estimate.cost import (
    SPREAD,
    MemoryEstimate,
    PhaseEstimate,
    actual_figures,
    memory_estimate,
    phase_memory_gib,
    phase_seconds,
)
from lifesearch_local.estimate.plan import AgentWork, PhasePlan
from lifesearch_local.estimate.work import Arch, Shape, Unit
from serving.config import RayConfig, model_config

MODEL = model_config(model="m", device="cpu")


def profile(**kw) -> EngineProfile:
    base = {"key": "k", "model": "m", "where": "in-process", "machine": {}, "measured_at": "t", "load_average": [0, 0, 0],
            "open_s": 2.0, "close_s": 0.5, "warm_s": 0.5, "call_s": 0.0, "choice_s": [1.0, 2.0], "choice_flops": 10.0}
    return EngineProfile(**{**base, **kw})


def unit(flops: float, cost: float = 1.0) -> Unit:
    return Unit(flops=flops, tokens=1, prompt_tokens=1, cost=cost, rows=1)


def test_a_judge_phase_is_its_fixed_costs_plus_its_flops_at_the_calibrated_rate():
    # rate: 10 FLOPs in the median repeat's 2 s (of two, the upper) = 5 FLOP/s; fastest 10, slowest 5
    plan = PhasePlan("judge/j", "judge", MODEL, decisions=3, calls=[[unit(20.0)], [unit(10.0), unit(20.0)]], requests=3)
    s = phase_seconds(plan, profile(), None)
    assert s.estimate == 3.0 + 50.0 / 5.0
    assert s.low == pytest.approx(min(3.0 + 50.0 / 10.0, s.estimate * (1 - SPREAD)))
    assert s.high == pytest.approx(max(3.0 + 50.0 / 5.0, s.estimate * (1 + SPREAD)))


def test_a_ray_pool_splits_a_call_and_the_first_pool_pays_for_starting_ray():
    plan = PhasePlan("judge/j", "judge", MODEL, decisions=2, calls=[[unit(20.0, 5), unit(20.0, 5)]], requests=2)
    one = phase_seconds(plan, profile(), None)
    two = phase_seconds(plan, profile(), RayConfig(replicas=2), extra_s=7.0)
    assert one.estimate - 3.0 == 8.0 and two.estimate - 3.0 - 7.0 == 4.0


def test_nothing_to_do_costs_nothing_and_no_profile_is_no_time():
    idle = PhasePlan("judge/j", "judge", MODEL, decisions=0)
    assert phase_seconds(idle, None, None).estimate == 0.0
    busy = PhasePlan("judge/j", "judge", MODEL, decisions=1, requests=1, calls=[[unit(1.0)]])
    assert phase_seconds(busy, None, None) is None


def test_an_agent_phase_counts_waves_calls_and_decoding_steps():
    # 5 runs, 2 at a time: 3 waves; 2 calls a run; a call = prefill (0.1 s per 10-token prompt) + 9 steps × 0.05 s
    work = AgentWork(calls_per_run=(1, 2, 4), output_tokens=(10, 10, 10), parallel=2,
                     first=[Unit(flops=0, tokens=20, prompt_tokens=10, cost=1)] * 5)
    plan = PhasePlan("agent/a", "agent", MODEL, runs=5, agent=work, requests=5)
    prof = profile(choice_s=[], prefill_s=0.2, prefill_tokens=20, step_s=0.05, gen_rows=2)
    s = phase_seconds(plan, prof, None)
    call = 0.2 / 20 * 2 * 10 + 9 * 0.05
    assert s.estimate == pytest.approx(3.0 + 3 * 2 * call)
    assert s.high == pytest.approx(3.0 + 3 * 4 * call) and s.low == pytest.approx(min(3.0 + 3 * call, s.estimate * 0.85))
    # one request per engine call, one call at a time: each step of a wave takes two calls
    one_by_one = PhasePlan("agent/a", "agent", MODEL, runs=5, requests=5, agent=replace(work, max_batch=1))
    assert phase_seconds(one_by_one, prof, None).estimate == pytest.approx(3.0 + 2 * 3 * 2 * call)


def test_memory_is_weights_and_kv_at_the_budget_per_local_replica():
    arch = Arch(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=1000, tied=True)
    shape = Shape(tokenizer=None, arch=arch, limit=None, device="cpu", form="shared", budget=1024, dtype_bytes=4)
    plan = PhasePlan("judge/j", "judge", MODEL, decisions=1, requests=1, calls=[[Unit(0, 10, 4000, 1, rows=2)]])
    one = phase_memory_gib(plan, shape, None)
    expected = arch.params * 4 + arch.kv_bytes_per_token(4) * 2000 + 1024 * (2 * 64 + 2 * 128) * 4 + 64 * 1000 * 4
    assert one == round(expected / 2**30, 3)
    assert phase_memory_gib(plan, shape, RayConfig(replicas=3)) == round(3 * expected / 2**30, 3)
    assert phase_memory_gib(plan, shape, RayConfig(replicas=3, address="auto")) == one  # a remote cluster's own
    # the `shared` form's own layer loop holds a packed copy of the layers' linear weights (smollm2-135m's shape)
    big = Arch(layers=30, hidden=576, heads=9, kv_heads=3, head_dim=64, intermediate=1536, vocab=49152, tied=True)
    plain = phase_memory_gib(plan, replace(shape, arch=big), None)
    looped = phase_memory_gib(plan, replace(shape, arch=big, rows_loop=True), None)
    assert looped == pytest.approx(plain + big.linear_params * 4 / 2**30, abs=1e-3) and looped - plain > 0.3


def test_fits_compares_the_largest_phase_with_the_free_memory():
    small = PhaseEstimate(kind="judge", model="m", memory_gib=0.001)
    huge = PhaseEstimate(kind="agent", model="m", memory_gib=1e6)
    mem = memory_estimate({"a": small, "b": huge}, ["cpu"], remote=False)
    assert mem.needed_gib == 1e6 and mem.free_gib > 0 and mem.fits is False
    assert memory_estimate({"a": small}, ["cpu"], remote=True) == MemoryEstimate(needed_gib=0.001, free_gib=None,
                                                                                 fits=None, device="cpu")


def test_actual_figures_sit_beside_the_estimate_with_their_ratio():
    est = {"phases": {"judge/j": {"kind": "judge", "seconds": {"estimate": 10.0}},
                      "reporteval/j": {"kind": "reporteval", "seconds": {"estimate": 4.0}}},
           "total_seconds": 20.0, "startup_seconds": 5.0}
    stages = {"judge/j": {"decisions": 12, "wall_s": 11.0, "phase_wall_s": 12.0, "forward_tokens": 300},
              "reporteval/j": {"quality": {"decisions": 5}, "redundancy": {"decisions": 2}, "wall_s": 2.0,
                               "engine": {"forward_tokens": 50}}}
    out = actual_figures(est, stages, 18.0)
    assert out["phases"]["judge/j"] == {"seconds": 12.0, "decisions": 12, "runs": None, "tokens": 300, "ratio": 1.2}
    assert out["phases"]["reporteval/j"]["decisions"] == 7 and out["phases"]["reporteval/j"]["tokens"] == 50
    assert out["ratio"] == 1.2 and out["run_seconds"] == 18.0  # the run's clock starts after start-up: 18 / 15
