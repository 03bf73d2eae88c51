"""The model work of a phase as the estimate sees it: token ids through the real tokenizer, kernel passes, FLOPs.

Pure given a tokenizer and the model's config: it counts what the engines compute (the packed kernel's own
plan, serving.kernels.plan; vLLM's prefix cache by whole blocks), so the token counts match the engine's own
counters; tests hold them to it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# vLLM caches whole blocks: a prompt recomputes what follows the last full block of the shared prefix.
VLLM_BLOCK = {"cpu": 128, "cuda": 16}
# Approximate tokens where no tokenizer is at hand (a model not downloaded here): about 4 ASCII characters a
# token and 0.7 tokens a CJK character for current BPE tokenizers, and a few tokens of chat template a message.
CHARS_PER_TOKEN = 4.0
CJK_TOKENS = 0.7
TEMPLATE_TOKENS = 5


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
    experts: int = 1
    """MLP experts per layer (1: a dense model)."""
    active_experts: int = 1
    """Experts each token goes through."""

    @property
    def linear_params(self) -> int:
        """Weights every token multiplies through (attention projections and the gated MLP of each layer; of a
        mixture of experts, the experts a token is routed to)."""
        attn = self.hidden * self.heads * self.head_dim * 2 + self.hidden * self.kv_heads * self.head_dim * 2
        return self.layers * (attn + 3 * self.hidden * self.intermediate * self.active_experts)

    @property
    def params(self) -> int:
        """All weights (every expert), embeddings (and an untied lm_head) included; norms are negligible."""
        idle = self.layers * 3 * self.hidden * self.intermediate * (self.experts - self.active_experts)
        return self.linear_params + idle + self.vocab * self.hidden * (1 if self.tied else 2)

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
        experts = int(getattr(c, "num_local_experts", None) or getattr(c, "num_experts", None) or 1)
        active = int(getattr(c, "num_experts_per_tok", None) or getattr(c, "experts_per_token", None) or 1)
        return Arch(layers=int(c.num_hidden_layers), hidden=int(c.hidden_size), heads=heads,
                    kv_heads=int(getattr(c, "num_key_value_heads", None) or heads), head_dim=head_dim,
                    intermediate=int(getattr(c, "moe_intermediate_size", None) or c.intermediate_size)
                    if experts > 1 else int(c.intermediate_size), vocab=int(c.vocab_size),
                    tied=bool(getattr(c, "tie_word_embeddings", False)), experts=experts,
                    active_experts=min(active, experts))
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
    """Its tokenizer (None: tokens unknown, e.g. an endpoint, or approximated from characters where `arch` is known)."""
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

    @property
    def countable(self) -> bool:
        """Whether its work can be counted: real tokens, or approximate ones on a known shape."""
        return self.tokenizer is not None or self.arch is not None


def approx_tokens(text: str) -> int:
    """Tokens of `text` where no tokenizer is at hand: CHARS_PER_TOKEN ASCII characters a token, CJK_TOKENS a
    token for every other character (what BPE tokenizers of current models give on English and Chinese prose)."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars / CHARS_PER_TOKEN + (len(text) - ascii_chars) * CJK_TOKENS)


def _text(messages: Sequence[dict], tail: str = "") -> tuple[str, int]:
    """A request's data as one text, and the tokens its chat template adds (TEMPLATE_TOKENS a message)."""
    return "\n".join(str(m.get("content") or "") for m in messages) + tail, TEMPLATE_TOKENS * (len(messages) + 1)


def approx_ids(group: Any, limit: int | None) -> list[list[int]]:
    """Stand-in token ids of a group's prompts where no tokenizer is at hand: their shared prefix and each
    suffix at their approximate lengths (a report longer than the context cut to fit, as the engine cuts it),
    so that the kernel's own plan and vLLM's cache rule count them as they would the real ids."""
    texts = [_text(r.messages, r.prefill) for r in group.requests]
    shared = len(os.path.commonprefix([t for t, _ in texts])) if len(texts) > 1 else 0
    widths = [approx_tokens(t[shared:]) + extra * (not shared) + 1 for t, extra in texts]
    prefix = approx_tokens(texts[0][0][:shared]) + texts[0][1] if shared else 0
    if limit:
        prefix = max(0, min(prefix, limit - max(widths) - 1))
    return [[0] * prefix + [k + 1] * w for k, w in enumerate(widths)]


def choice_unit(shape: Shape, group: Any, choices: Sequence[str]) -> Unit:
    """One choice group's work: its items as the engine builds them (`choice_group_items`; without a tokenizer,
    `approx_ids`), its passes."""
    from serving import choice_group_items, group_cost

    if shape.tokenizer is None:
        ids = approx_ids(group, shape.limit)
    else:
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

    if shape.tokenizer is None:  # approximate tokens: the messages, the tool schemas, the template
        text, extra = _text(request.messages, json.dumps(request.tools) if request.tools else "")
        n = min(approx_tokens(text) + extra, (shape.limit or 10**9) - 1)
        ids, room = range(n), (shape.limit or 10**9) - n
    else:
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
