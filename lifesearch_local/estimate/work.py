"""The model work of a phase as the estimate sees it: token ids through the real tokenizer, kernel passes, FLOPs.

Pure given a tokenizer and the model's config: it counts what the engines compute (the packed kernel's own
plan, serving.kernels.plan; vLLM's prefix cache by whole blocks), so the token counts match the engine's own
counters; tests hold them to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# vLLM caches whole blocks: a prompt recomputes what follows the last full block of the shared prefix.
VLLM_BLOCK = {"cpu": 128, "cuda": 16}


@dataclass(frozen=True)
class Pass:
    """One forward call: `rows` sequences of `width` new tokens after `context` cached ones."""

    rows: int
    width: int
    context: int
    logits: int
    """Rows whose next-token logits are computed (the lm_head's work)."""
    widths: tuple[int, ...] = ()
    """Each row's own width where the rows are packed without padding (`width` is then the widest)."""

    @property
    def tokens(self) -> int:
        """Positions computed: padded rows × width, or the packed rows' own widths."""
        return sum(self.widths) if self.widths else self.rows * self.width


@dataclass(frozen=True)
class Arch:
    """The shape of a decoder, enough to count its FLOPs, weights and KV cache."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool

    @property
    def linear_params(self) -> int:
        """Weights every token multiplies through (attention projections and the gated MLP of each layer)."""
        attn = self.hidden * self.heads * self.head_dim * 2 + self.hidden * self.kv_heads * self.head_dim * 2
        return self.layers * (attn + 3 * self.hidden * self.intermediate)

    @property
    def params(self) -> int:
        """All weights, embeddings (and an untied lm_head) included; norms are negligible."""
        return self.linear_params + self.vocab * self.hidden * (1 if self.tied else 2)

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes

    def flops(self, p: Pass) -> float:
        """Matmul FLOPs of one pass: the linears for every new token, attention over the cached and the
        causal new keys, the lm_head at the kept rows."""
        pairs = sum(w * p.context + w * (w + 1) // 2 for w in (p.widths or (p.width,) * p.rows))
        return 2.0 * self.linear_params * p.tokens + 4.0 * self.layers * self.heads * self.head_dim * pairs \
            + 2.0 * self.hidden * self.vocab * p.logits


def arch_of(config: Any) -> Arch | None:
    """The Arch of a transformers config (its text part for multimodal ones); None if it lacks a field."""
    c = getattr(config, "text_config", None) or config
    try:
        heads = int(c.num_attention_heads)
        head_dim = int(getattr(c, "head_dim", None) or c.hidden_size // heads)
        return Arch(layers=int(c.num_hidden_layers), hidden=int(c.hidden_size), heads=heads,
                    kv_heads=int(getattr(c, "num_key_value_heads", None) or heads), head_dim=head_dim,
                    intermediate=int(c.intermediate_size), vocab=int(c.vocab_size),
                    tied=bool(getattr(c, "tie_word_embeddings", False)))
    except (AttributeError, TypeError, ValueError):
        return None


def choice_form(kernel: str, config: Any, device: str) -> str:
    """The form the packed kernel takes for `kernel` (its own rule: serving.kernels.plan.choice_form)."""
    from serving import choice_form as kernel_form

    return kernel_form(kernel, config, device)


def kernel_passes(ids: Sequence[Sequence[int]], form: str, budget: int | None = None,
                  rows_loop: bool = False) -> list[Pass]:
    """The forward calls the packed kernel makes for one group: its plan (serving.kernels.plan.plan_group), each
    pass as the estimate counts it; `rows_loop`: `shared` runs its own layer loop, rows packed without padding."""
    from serving import plan_group

    plan = plan_group(ids, form, budget, rows_loop=rows_loop)
    if form == "single":
        return [Pass(1, len(ids[k]), 0, 1) for (k,) in plan.batches]
    p, widths = plan.prefix, plan.widths
    out = [Pass(1, b - a, a, 1) for a, b in plan.prefill]
    for part in plan.batches:
        own = tuple(widths[k] for k in part) if plan.packed else ()
        out.append(Pass(len(part), max(widths[k] for k in part), p, len(part), own))
    return out


def vllm_passes(ids: Sequence[Sequence[int]], device: str) -> list[Pass]:
    """What vLLM computes for one group with prefix caching: the first prompt whole, then each other
    prompt from the last full cache block of the shared prefix."""
    from serving import common_prefix_len

    if len(ids) < 2:
        return [Pass(1, len(s), 0, 1) for s in ids]
    block = VLLM_BLOCK.get(device, 16)
    cached = common_prefix_len(ids) // block * block
    return [Pass(1, len(ids[0]), 0, 1)] + [Pass(1, len(s) - cached, cached, 1) for s in ids[1:]]


@dataclass
class Unit:
    """One choice group or one chat request the engine gets (a Ray pool places each whole)."""

    flops: float
    """FLOPs of its forward passes (0 when the model's shape is unknown)."""
    tokens: int
    """Tokens computed (prefixes once where the engine shares them)."""
    prompt_tokens: int
    """Tokens of its prompts as written (what one prompt per rubric would compute)."""
    cost: float
    """What a Ray pool balances replicas on (serving.ray.pool.group_cost / request_cost)."""
    rows: int = 1
    """Decisions (choice) or requests (generate)."""
    passes: int = 0
    """Forward calls (choice)."""
    steps: int = 0
    """Decoding steps after the prefill (generate)."""


@dataclass
class Shape:
    """What the estimate needs of one model: how it tokenizes and computes."""

    tokenizer: Any
    """Its tokenizer (None: tokens unknown, e.g. an endpoint)."""
    arch: Arch | None
    """Its shape (None: FLOPs unknown)."""
    limit: int | None
    """Positions it takes (prompts are fitted to it as the engine fits them)."""
    device: str
    """cpu or cuda."""
    form: str | None
    """Choice-scoring form: a packed kernel form (hf), `vllm`, or None (an endpoint)."""
    budget: int | None = None
    """The hf engine's token budget per batch (None: the kernel's default)."""
    rows_loop: bool = False
    """`shared` runs its own layer loop here (serving.kernels.packed_rows.config_supported)."""
    dtype_bytes: int = 4
    """Bytes per weight and KV element."""
    notes: list[str] = field(default_factory=list)
    """What could not be known, said once."""


def choice_unit(shape: Shape, group: Any, choices: Sequence[str]) -> Unit:
    """One choice group's work: its items as the engine builds them (`choice_group_items`), its passes."""
    from serving import choice_group_items, group_cost

    items, _ = choice_group_items(shape.tokenizer, group, choices, shape.limit)
    ids = [it.ids for it in items]
    if shape.form == "vllm":
        passes = vllm_passes(ids, shape.device)
    else:  # an endpoint (form None) computes every prompt whole, as far as this machine can tell
        passes = kernel_passes(ids, shape.form or "single", shape.budget, shape.rows_loop)
    flops = sum(shape.arch.flops(p) for p in passes) if shape.arch else 0.0
    return Unit(flops=flops, tokens=sum(p.tokens for p in passes), prompt_tokens=sum(len(s) for s in ids),
                cost=group_cost(group), rows=len(ids), passes=len(passes))


def generate_unit(shape: Shape, request: Any, template_kwargs: dict[str, Any], output_tokens: int) -> Unit:
    """One chat request's work: its prompt ids (`chat_ids`), prefilled once, then `output_tokens` decoding steps
    (fewer where the context leaves less room)."""
    from serving import chat_ids, request_cost

    ids, _, room = chat_ids(shape.tokenizer, request, shape.limit, template_kwargs)
    out = max(1, min(output_tokens, room))
    flops = shape.arch.flops(Pass(1, len(ids), 0, 1)) if shape.arch else 0.0  # the prefill; decoding is timed per step
    return Unit(flops=flops, tokens=len(ids) + out, prompt_tokens=len(ids), cost=request_cost(request), rows=1,
                steps=out)


def replica_seconds(costs: Sequence[float], seconds: Sequence[float], replicas: int) -> float:
    """Wall seconds of one engine call whose units take `seconds` each: a pool of `replicas` places
    them whole by `costs` (serving.ray.pool.assign) and the call lasts as long as its busiest replica."""
    from serving import assign

    if not seconds:
        return 0.0
    if replicas <= 1:
        return float(sum(seconds))
    return max(sum(seconds[i] for i in part) for part in assign(costs, [0.0] * replicas))
