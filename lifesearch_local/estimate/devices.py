"""What an estimate assumes where it cannot measure: GPU profiles from vendor datasheets, model shapes, and the
time of a phase on a named GPU at a stated utilisation (a login node pricing a GPU run before `sbatch`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lifesearch_local.errors import LifesearchError
from lifesearch_local.estimate.work import Arch, Pass, Shape

if TYPE_CHECKING:  # the table is read by the command line's help: keep its imports light
    from lifesearch_local.estimate.plan import PhasePlan

GB = 1e9
GIB = 2**30
DEFAULT_DEVICE = "h100"
DEFAULT_MFU = 0.35
"""Share of the bf16 peak a prefill-heavy phase reaches (judging, prompt processing): long-prompt prefill on
vLLM commonly runs at 30-50% of peak; the low end of a time assumes 1.5x this, the high end half of it."""
BANDWIDTH_USE = 0.6
"""Share of the memory bandwidth a decoding step reaches (it reads every weight and the KV cache once)."""
# Opening an engine: a fixed part (process and CUDA start, vLLM's profiling and graph capture) plus the
# weights read at a disk rate; low / point / high.
OPEN_FIXED_S = (15.0, 45.0, 180.0)
LOAD_BYTES_PER_S = (4 * GB, 2 * GB, 0.5 * GB)
STARTUP_S = (5.0, 10.0, 30.0)
"""Interpreter start and imports where no session profile was measured (low / point / high)."""


@dataclass(frozen=True)
class Device:
    """One GPU as its vendor's datasheet states it (dense bf16, no sparsity)."""

    label: str
    bf16_tflops: float
    memory_gb: float
    bandwidth_gbs: float
    source: str

    @property
    def memory_gib(self) -> float:
        return round(self.memory_gb * GB / GIB, 1)


DEVICES: dict[str, Device] = {
    "h100": Device("NVIDIA H100 SXM5 80GB", 989.4, 80, 3350, "NVIDIA H100 Tensor Core GPU datasheet (1,979 with sparsity)"),
    "h100-pcie": Device("NVIDIA H100 PCIe 80GB", 756.0, 80, 2000, "NVIDIA H100 Tensor Core GPU datasheet (1,513 with sparsity)"),
    "h100-nvl": Device("NVIDIA H100 NVL 94GB", 835.0, 94, 3900, "NVIDIA H100 Tensor Core GPU datasheet (1,671 with sparsity)"),
    "h200": Device("NVIDIA H200 SXM 141GB", 989.4, 141, 4800, "NVIDIA H200 Tensor Core GPU datasheet (1,979 with sparsity)"),
    "a100-40": Device("NVIDIA A100 SXM4 40GB", 312.0, 40, 1555, "NVIDIA A100 Tensor Core GPU datasheet (624 with sparsity)"),
    "a100-80": Device("NVIDIA A100 SXM4 80GB", 312.0, 80, 2039, "NVIDIA A100 Tensor Core GPU datasheet (624 with sparsity)"),
    "l40s": Device("NVIDIA L40S 48GB", 362.05, 48, 864, "NVIDIA L40S datasheet (733 with sparsity)"),
    "a10": Device("NVIDIA A10 24GB", 125.0, 24, 600, "NVIDIA A10 Tensor Core GPU datasheet (250 with sparsity)"),
    "l4": Device("NVIDIA L4 24GB", 121.0, 24, 300, "NVIDIA L4 Tensor Core GPU datasheet (242 with sparsity)"),
    "rtx4090": Device("NVIDIA GeForce RTX 4090 24GB", 165.2, 24, 1008,
                      "NVIDIA Ada Lovelace architecture whitepaper, bf16 with fp32 accumulate (330.3 with sparsity)"),
}

# The shapes of the models the bundled configs name, from each model's config.json on the Hugging Face hub
# (layers, hidden, heads, KV heads, head dim, MLP width per expert, vocabulary, tied embeddings, experts,
# experts per token; then the context length), for a machine that has not downloaded them.
KNOWN_MODELS: dict[str, tuple[Arch, int]] = {
    "Qwen/Qwen3-0.6B": (Arch(28, 1024, 16, 8, 128, 3072, 151936, True), 40960),
    "Qwen/Qwen3-8B": (Arch(36, 4096, 32, 8, 128, 12288, 151936, False), 40960),
    "Qwen/Qwen3-32B": (Arch(64, 5120, 64, 8, 128, 25600, 151936, False), 40960),
    "meta-llama/Llama-3.1-8B-Instruct": (Arch(32, 4096, 32, 8, 128, 14336, 128256, False), 131072),
    "openai/gpt-oss-20b": (Arch(24, 2880, 64, 8, 64, 2880, 201088, False, experts=32, active_experts=4), 131072),
}


def device(name: str) -> Device:
    """The profile named `name` (case-insensitive); an unknown name is a one-line error listing the known."""
    key = name.lower().replace("_", "-").replace(" ", "-")
    if key not in DEVICES:
        raise LifesearchError(f"--device {name!r}: not a known GPU; known: {', '.join(DEVICES)}")
    return DEVICES[key]


@dataclass(frozen=True)
class GpuAssumption:
    """The device and utilisation an analytic estimate assumes, said with the estimate."""

    name: str
    mfu: float

    @property
    def dev(self) -> Device:
        return device(self.name)

    def describe(self) -> str:
        d = self.dev
        return (f"{d.label}: {d.bf16_tflops:,g} TFLOP/s bf16 dense, {d.memory_gb:g} GB, {d.bandwidth_gbs:,g} GB/s "
                f"({d.source}); utilisation {self.mfu:g} of peak for prompts (--mfu), {BANDWIDTH_USE:g} of the "
                "bandwidth for decoding")

    def record(self) -> dict[str, Any]:
        d = self.dev
        return {"device": self.name, "label": d.label, "bf16_tflops": d.bf16_tflops, "memory_gb": d.memory_gb,
                "bandwidth_gbs": d.bandwidth_gbs, "source": d.source, "mfu": self.mfu, "bandwidth_use": BANDWIDTH_USE}


def known_arch(model: str) -> tuple[Arch, int] | None:
    """A model's shape and context from the built-in table (by hub id, or a path ending in it)."""
    for name, entry in KNOWN_MODELS.items():
        if model == name or model.rstrip("/").endswith("/" + name.split("/")[1]):
            return entry
    return None


def _mfus(mfu: float) -> tuple[float, float, float]:
    """Utilisation at the low end of the time, the point, the high end."""
    return min(0.9, mfu * 1.5), mfu, mfu / 2


def _open_s(weights: float) -> tuple[float, float, float]:
    return tuple(f + weights / r for f, r in zip(OPEN_FIXED_S, LOAD_BYTES_PER_S))  # type: ignore[return-value]


def analytic_seconds(plan: PhasePlan, shape: Shape, gpu: GpuAssumption, replicas: int) -> tuple[float, float, float]:
    """A phase's wall time (low, point, high) on the assumed GPU: opening the engine, then its prompts' FLOPs at
    the assumed utilisation (judge, ReportEval, an agent's prompts) and its decoding steps at the bandwidth
    (each step reads the weights and the batch's KV cache once), shared by `replicas` replicas of
    `tensor_parallel_size` GPUs each (counted as that many times one GPU's peak and bandwidth)."""
    if not plan.needs_model:
        return 0.0, 0.0, 0.0
    a, d = shape.arch, gpu.dev
    assert a is not None
    weights = a.params * shape.dtype_bytes
    tp = max(1, int(getattr(plan.model, "tensor_parallel_size", 1) or 1))  # a replica's GPUs share its work
    peak, bandwidth = d.bf16_tflops * 1e12 * tp, d.bandwidth_gbs * GB * tp
    opened = _open_s(weights)
    if plan.kind != "agent":
        flops = sum(n * u.flops for call, n in plan.weighted() for u in call)
        steps = sum(n * u.steps for call, n in plan.weighted() for u in call)
        work = [flops / (peak * m) / replicas + steps * weights / (bandwidth * BANDWIDTH_USE) / replicas
                for m in _mfus(gpu.mfu)]
        return tuple(round(o + w, 2) for o, w in zip(opened, work))  # type: ignore[return-value]
    return tuple(round(o + _agent_s(plan, a, shape.dtype_bytes, peak, bandwidth, m, which, replicas), 2)  # type: ignore[return-value]
                 for which, (o, m) in enumerate(zip(opened, _mfus(gpu.mfu))))


def _agent_s(plan: PhasePlan, a: Arch, dtype_bytes: int, peak: float, bandwidth: float, mfu: float, which: int,
             replicas: int) -> float:
    """Waves of `parallel` runs; each run's calls one after another; a call prefills its prompt (compute-bound)
    and decodes its output tokens in steps that serve the whole wave at once (bandwidth-bound)."""
    w = plan.agent
    if w is None or not w.first or not plan.runs:
        return 0.0
    prompt = sum(u.prompt_tokens for u in w.first) / len(w.first)
    out = w.output_tokens[which]
    batch = max(1, math.ceil(w.parallel / replicas))
    prefill = batch * a.flops(Pass(1, int(prompt), 0, 1)) / (peak * mfu)
    kv = batch * a.kv_bytes_per_token(dtype_bytes) * (prompt + out / 2)
    step = max((a.params * dtype_bytes + kv) / (bandwidth * BANDWIDTH_USE),
               2.0 * a.linear_params * batch / (peak * mfu))
    waves = math.ceil(plan.runs / (batch * replicas))
    return waves * w.calls_per_run[which] * (prefill + out * step)


def analytic_assumptions(shape: Shape | None) -> list[str]:
    """What an analytic phase's time assumes, said with it."""
    out = list(shape.notes if shape else [])
    out.append(f"engine start {OPEN_FIXED_S[1]:g} s ({OPEN_FIXED_S[0]:g}–{OPEN_FIXED_S[2]:g} s) plus the weights "
               f"read at {LOAD_BYTES_PER_S[1] / GB:g} GB/s ({LOAD_BYTES_PER_S[2] / GB:g}–{LOAD_BYTES_PER_S[0] / GB:g})")
    out.append("prompt FLOPs at the utilisation (low end 1.5×, high end half of it); decoding steps read the weights "
               "and the batch's KV cache once at the bandwidth share")
    return out

