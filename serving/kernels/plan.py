"""The packed kernel's plan: which form a model can take and how one group of prompts is split into passes.

The kernel (serving.kernels.kernel.PackedScorer) executes this plan and the run estimate counts it,
so a rule here (a budget, a chunk, a batch size) holds for both by construction: neither re-derives it.
Pure: token ids and a model config in, indices out; no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..config import HFConfig
from ..protocol import UnsupportedModelError

# A long prefix runs in chunks of this many tokens over the KV cache, so a stop request (SIGTERM)
# is honoured within one chunk's time instead of one whole-report forward. Half the default token
# budget: a batch of rubric rows already runs up to the budget between two checks, so a chunk under it
# adds no longer wait; and most reports (drb-56's median is 2,292 tokens) run as one pass, which in bf16
# on AMX took 0.57 s against 0.73 s in 1,024-token chunks (docs/benchmarks.md).
PREFILL_CHUNK = 4096
# Tokens one batch may hold where a model block sets none.
TOKEN_BUDGET: int = HFConfig.model_fields["token_budget"].default

# Layer kinds of hybrid models: their state is not a per-token KV cache, so packing with
# an attention mask would silently compute something else.
_NON_ATTENTION = ("linear", "mamba", "ssm", "conv", "recurrent", "rwkv", "deltanet", "lightning", "moba")
_HYBRID_TYPES = {
    "jamba", "zamba", "zamba2", "bamba", "falcon_h1", "falcon_mamba", "mamba", "mamba2", "qwen3_next",
    "lfm2", "granitemoehybrid", "nemotron_h", "recurrent_gemma", "rwkv", "xlstm", "minimax", "plamo2",
    "kimi_linear", "qwen3_5", "olmo_hybrid",
}


def check_attention_only(config: Any) -> None:
    """Refuse hybrid or linear-attention models with a clear message."""
    model_type = getattr(config, "model_type", "?")
    kinds = set(getattr(config, "layer_types", None) or [])
    odd = sorted(k for k in kinds if any(s in str(k) for s in _NON_ATTENTION))
    if model_type in _HYBRID_TYPES or odd:
        what = f"layer types {odd}" if odd else f"model type {model_type!r}"
        raise UnsupportedModelError(
            f"the packed judge kernel needs an attention-only decoder; this model has {what} "
            "(hybrid / linear attention / state-space). Use the vllm backend or kernel form 'single'."
        )


def sliding_window(config: Any) -> int | None:
    """The attention window if the model uses one on every layer, else None."""
    w = getattr(config, "sliding_window", None)
    if not w or getattr(config, "use_sliding_window", True) is False:
        return None
    kinds = set(getattr(config, "layer_types", None) or [])
    if kinds and kinds != {"sliding_attention"}:
        raise UnsupportedModelError(
            f"mixed sliding/full attention layers ({sorted(kinds)}) are not supported by the packed kernel"
        )
    return int(w)


def shared_ok(config: Any) -> bool:
    """Whether the one-prefix-KV forms apply (`shared`, and generation over a shared prefix): attention on
    every layer, no sliding window, no softcapping."""
    try:
        check_attention_only(config)
        return sliding_window(config) is None and not getattr(config, "attn_logit_softcapping", None)
    except UnsupportedModelError:
        return False


def choice_form(kernel: str, config: Any, device: str) -> str:
    """The form the kernel takes for the configured `kernel`: `auto` is `shared` on CPU where the model allows it
    (measured on drb-56, docs/benchmarks.md), else two_stage; any other form as named."""
    if kernel != "auto":
        return kernel
    return "shared" if device == "cpu" and shared_ok(config) else "two_stage"


def rows_loop(config: Any, device: str) -> bool:
    """Whether `shared` runs on its own layer loop for this config on `device` (serving.kernels.packed_rows: rows
    packed end to end without padding), as far as the config tells."""
    from .packed_rows import config_supported

    return config_supported(config, device)


def common_prefix_len(seqs: Sequence[Sequence[int]]) -> int:
    """Longest common prefix, capped so that every sequence keeps at least one suffix token."""
    n = min(len(s) for s in seqs) - 1
    first = seqs[0]
    for i in range(n):
        t = first[i]
        if any(s[i] != t for s in seqs[1:]):
            return i
    return max(n, 0)


def token_chunks(lengths: Sequence[int], prefix: int, budget: int) -> list[list[int]]:
    """Consecutive indices per batch: prefix + the batch's tokens ≤ budget; at least one row each."""
    chunks: list[list[int]] = []
    used = budget
    for i, n in enumerate(lengths):
        if chunks and used + n <= budget:
            chunks[-1].append(i)
            used += n
        else:
            chunks.append([i])
            used = prefix + n
    return chunks


def row_chunks(widths: Sequence[int], prefix: int, budget: int) -> list[list[int]]:
    """Consecutive row indices per batch: prefix + rows × (widest suffix) ≤ budget; at least one row each."""
    chunks: list[list[int]] = []
    widest = 0
    for i, w in enumerate(widths):
        if chunks and prefix + (len(chunks[-1]) + 1) * max(widest, w) <= budget:
            chunks[-1].append(i)
            widest = max(widest, w)
        else:
            chunks.append([i])
            widest = w
    return chunks


@dataclass(frozen=True)
class GroupPlan:
    """The forward passes of one group of prompts sharing a prefix, in the order the kernel runs them."""

    form: str
    """two_stage | shared | single."""
    prefix: int
    """Tokens of the shared prefix, run once (0 for `single`)."""
    prefill: tuple[tuple[int, int], ...]
    """The prefix's forward passes as [start, end) spans: chunks over the KV cache for two_stage; one span for
    `shared`, whose prefill chunks by `chunk` inside one counted pass."""
    batches: tuple[tuple[int, ...], ...]
    """Prompt indices of each later forward pass (each prompt alone for `single`)."""
    widths: tuple[int, ...]
    """Each prompt's tokens after the prefix."""
    chunk: int
    """The prefill chunk the prefix runs in."""
    packed: bool = False
    """The batches hold their rows end to end without padding (`shared` on its own layer loop)."""


def plan_group(ids: Sequence[Sequence[int]], form: str, budget: int | None = None, *, rows_loop: bool = False,
               chunk: int | None = None) -> GroupPlan:
    """How the kernel runs one group in `form` within `budget` tokens a batch. two_stage: the prefix in chunks,
    then consecutive rows, each holding its own copy of the prefix's KV (budget // (prefix + widest suffix) rows a
    batch); shared: the prefix once, then rows reading that one KV: by suffix length, prefix + rows × widest ≤
    budget (padded), or consecutive, prefix + their own tokens ≤ budget (`rows_loop`, packed without padding)."""
    budget = TOKEN_BUDGET if budget is None else budget
    chunk = max(1, PREFILL_CHUNK if chunk is None else chunk)
    if form == "single":
        return GroupPlan(form, 0, (), tuple((k,) for k in range(len(ids))), tuple(len(s) for s in ids), chunk)
    p = common_prefix_len(ids)
    widths = [len(s) - p for s in ids]
    if form == "shared":
        prefill = ((0, p),) if p else ()
        if rows_loop:
            batches = token_chunks(widths, p, budget)
        else:
            order = sorted(range(len(ids)), key=lambda k: len(ids[k]))
            batches = [[order[k] for k in part] for part in row_chunks([widths[k] for k in order], p, budget)]
    elif form == "two_stage":
        prefill = tuple((a, min(p, a + chunk)) for a in range(0, p, chunk))
        rows = max(1, budget // (p + max(widths)))
        batches = [list(range(a, min(len(ids), a + rows))) for a in range(0, len(ids), rows)]
    else:
        raise ValueError(f"no plan for kernel form {form!r}")
    return GroupPlan(form, p, prefill, tuple(tuple(b) for b in batches), tuple(widths), chunk,
                     packed=form == "shared" and rows_loop)
