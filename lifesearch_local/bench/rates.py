"""What a judge column's work costs in FLOPs, and what this machine's matrix multiply does per second.

A column's FLOPs are counted from the token positions it computes: every computed token costs two FLOPs per
weight of the decoder layers, and attends causally to every earlier position of its prompt (four FLOPs per
query-key pair per head and layer: QKᵀ and PV); the output head runs once per decision. The packed kernel
computes each report's shared prefix once and each rubric's suffix after it; one prompt per rubric computes
every prompt whole; vLLM's prefix cache serves whole blocks of the report to every prompt after a report's
first, so each such prompt recomputes the report's partial last block and its suffix.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from serving import bf16_native


@dataclass(frozen=True)
class Shape:
    """What one token costs a decoder-only model: its weights per layer and its attention's size."""

    layer_params: int
    """Weights of the decoder layers (embeddings and the output head not counted)."""
    layers: int
    """Decoder layers."""
    heads: int
    """Query heads per layer."""
    head_dim: int
    """Dimension of one head."""
    hidden: int
    """Hidden size (the output head's input)."""
    vocab: int
    """Vocabulary size (the output head's output)."""

    @classmethod
    def of(cls, model: Any) -> Shape:
        cfg = model.config
        layers = model.model.layers if hasattr(model, "model") else []
        params = sum(p.numel() for p in layers.parameters()) if layers else 0
        heads = cfg.num_attention_heads
        return cls(params, cfg.num_hidden_layers, heads, getattr(cfg, "head_dim", None) or cfg.hidden_size // heads,
                   cfg.hidden_size, cfg.vocab_size)

    def flops(self, spans: Iterable[tuple[int, int]], decisions: int) -> float:
        """FLOPs of computing the positions [start, end) of each span (every position attends to all before it
        and itself), plus the output head at `decisions` positions."""
        tokens = pairs = 0
        for a, b in spans:
            tokens += b - a
            pairs += (b * (b + 1) - a * (a + 1)) // 2
        return (2.0 * self.layer_params * tokens + 4.0 * self.layers * self.heads * self.head_dim * pairs
                + 2.0 * self.hidden * self.vocab * decisions)


def spans(groups: Sequence[Sequence[Any]], how: str, block: int = 16) -> list[tuple[int, int]]:
    """The positions each column computes, per prompt: `packed` (a group's shared prefix once, then each
    suffix after it), `prefix` (the shared prefixes alone), `single` (every prompt whole) or `vllm` (a
    group's first prompt whole, every other one from the last `block` boundary inside the shared prefix)."""
    from serving import common_prefix_len

    out: list[tuple[int, int]] = []
    for items in groups:
        lengths = [len(it.ids) for it in items]
        if how == "single":
            out += [(0, n) for n in lengths]
            continue
        p = common_prefix_len([it.ids for it in items])
        if how == "prefix":
            out.append((0, p))
        elif how == "packed":
            out += [(0, p)] + [(p, n) for n in lengths]
        else:
            cached = p // block * block
            out += [(0, lengths[0])] + [(cached, n) for n in lengths[1:]]
    return out


def matmul_rate(dtype_name: str, device: str, sizes: Sequence[tuple[int, int]], budget_s: float = 0.4,
                rows: int | None = None) -> float:
    """This device's matrix-multiply rate in GFLOP/s (torch, this process's threads): the best over the given
    (inner, outer) weight sizes and a square one, `rows` rows (default 2,048 on CPU, 8,192 on GPU), each shape
    timed for about `budget_s`, as torch's matmul and, on CPU, as oneDNN's linear on a weight packed for it
    (the packed loop's and vLLM's path; twice the BLAS rate on an AVX-512 AMD CPU, where the BLAS takes its
    AVX2 code). A product whose one call takes longer than the budget (an emulated dtype) ends the
    measurement there."""
    import torch

    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype_name]
    rows = rows or (8192 if device == "cuda" else 2048)
    best = 0.0
    for k, n in [*sizes, (rows, rows)]:
        a = torch.randn(rows, k, dtype=dtype, device=device)
        b = torch.randn(k, n, dtype=dtype, device=device)
        for product in _products(a, b, device):
            fastest, spent = float("inf"), 0.0
            while spent < budget_s:
                t = _timed(product, device)
                fastest, spent = min(fastest, t), spent + t
                if t > budget_s:  # emulated: one call says enough
                    return max(best, 2.0 * rows * k * n / fastest / 1e9)
            best = max(best, 2.0 * rows * k * n / fastest / 1e9)
    return best


def _products(a: Any, b: Any, device: str) -> list[Any]:
    """`a @ b` as torch's matmul, and on CPU through oneDNN on `b` packed once (where torch has that path)."""
    from serving.kernels.packed_rows import Linear

    out = [lambda: a @ b]
    if device == "cpu":
        linear = Linear(b.t().contiguous())
        if linear.packed is not None:
            out.append(lambda: linear(a))
    return out


def _timed(product: Any, device: str) -> float:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    product()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def model_sizes(shape: Shape, intermediate: int | None) -> list[tuple[int, int]]:
    """The (inner, outer) sizes of the model's largest linears, for `matmul_rate`."""
    mid = intermediate or 4 * shape.hidden
    return [(shape.hidden, mid), (mid, shape.hidden)]


def machine_rates(model: Any, device: str, dtypes: Sequence[str]) -> dict[str, float]:
    """GFLOP/s of matrix multiplies on this device per dtype (`matmul_rate`), on the model's linear shapes (warmed up first)."""
    shape = Shape.of(model)
    sizes = model_sizes(shape, getattr(model.config, "intermediate_size", None))
    out = {}
    for name in dtypes:
        # bf16 on a CPU without bf16 instructions runs ~30× slower than fp32: a few rows say enough
        rows = 256 if device == "cpu" and name != "float32" and not bf16_native() else None
        matmul_rate(name, device, sizes[:1], budget_s=0.0, rows=rows)  # first-call allocation, thread pool start
        out[name] = round(matmul_rate(name, device, sizes, rows=rows), 1)
    return out


def column_rates(res: dict, shape: Shape, groups: Sequence[Sequence[Any]], matmul: dict[str, float]) -> dict:
    """Per column in `res` (packed, naive, vllm): GFLOP a run, achieved GFLOP/s at its median and that
    against this device's matmul rate in the column's dtype."""
    decisions = sum(len(g) for g in groups)
    out: dict[str, Any] = {}
    for name, how, dtype in (("packed", "packed", res["dtype"]), ("naive", "single", res["dtype"]),
                             ("vllm", "vllm", res.get("vllm_dtype")), ("prefix", "prefix", res["dtype"])):
        if f"{name}_s" not in res:
            continue
        flops = shape.flops(spans(groups, how, res.get("vllm_block_size") or 16), 0 if how == "prefix" else decisions)
        rate = flops / res[f"{name}_s"] / 1e9
        out[f"{name}_gflop"] = round(flops / 1e9, 1)
        out[f"{name}_gflops"] = round(rate, 1)
        if matmul.get(dtype):
            out[f"{name}_of_matmul"] = round(rate / matmul[dtype], 3)
        if res.get("peak_tflops"):
            out[f"{name}_of_peak"] = round(rate / 1e3 / res["peak_tflops"], 3)
    return out


def prefix_fields(seconds: Sequence[float]) -> dict[str, Any]:
    """The prefix pass's timed runs: `prefix_s` (the median) and every run."""
    from lifesearch_local.bench.timing import spread

    return {"prefix_s": spread(seconds)["median"], "prefix_runs": [round(x, 4) for x in seconds]}
