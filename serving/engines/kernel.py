"""The packed judge kernel: score many prompts that share a prefix in one forward pass.

All rubric prompts of one report (a group) share a long prefix (template head + question +
report) and differ in a short suffix. The prefix runs once; each suffix sees the whole prefix
and itself causally, never another suffix, its positions continuing after the prefix, and
logits are computed only at each suffix's last token. Groups run one at a time.

Forms (the packed ones must equal scoring each prompt alone; tests check it):
- `two_stage`: the prefix once with its KV cache, then the suffixes in batches over that
  cache (each row of a batch holds a copy of the prefix's KV);
- `shared`: the prefix once, then all suffixes as one batch whose attention reads the one
  prefix KV for every row (serving.engines.shared_attention: no per-row copy, an exact
  log-sum-exp merge with each row's own keys), so a report's rubrics stay in one batch
  whatever the prefix length; attention-only models without sliding windows;
- `single`: every prompt alone, batch size 1: the reference of the tests, the baseline of
  `lifesearch bench judge`, and the one form for hybrid and linear-attention models.

Removed (issue 31): `dense` and `flex` (one packed sequence of several reports under a 4D or a
FlexAttention block mask; slower than two_stage on CPU and on an H200, docs/benchmarks.md) and
`naive` (every full prompt in padded batches: `single` computes the same without padding).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import stop
from ..chat import Item
from ..config import KERNEL_FORMS
from ..progress_hook import decided
from ..protocol import UnsupportedModelError

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


@dataclass
class KernelStats:
    """Work done, for benchmarks and manifests."""

    forward_tokens: int = 0
    """Tokens run through the model (prefixes counted once when packed)."""
    prompt_tokens: int = 0
    """Tokens of the prompts as given (what one-prompt-per-rubric would process)."""
    passes: int = 0
    """Forward calls."""
    decisions: int = 0
    """Prompts scored."""
    seconds: float = 0.0
    """Wall time inside the kernel."""
    forms: dict[str, int] = field(default_factory=dict)
    """Forward passes per form."""

    def add(self, form: str, tokens: int) -> None:
        self.forward_tokens += tokens
        self.passes += 1
        self.forms[form] = self.forms.get(form, 0) + 1


def common_prefix_len(seqs: Sequence[Sequence[int]]) -> int:
    """Longest common prefix, capped so that every sequence keeps at least one suffix token."""
    n = min(len(s) for s in seqs) - 1
    first = seqs[0]
    for i in range(n):
        t = first[i]
        if any(s[i] != t for s in seqs[1:]):
            return i
    return max(n, 0)


def _shared_ok(model: Any) -> bool:
    """Whether the `shared` form applies: attention on every layer, no sliding window, no softcapping."""
    try:
        check_attention_only(model.config)
        return sliding_window(model.config) is None and not getattr(model.config, "attn_logit_softcapping", None)
    except UnsupportedModelError:
        return False


def _auto_form(model: Any) -> str:
    """`shared` on CPU where the model allows it (measured on drb-56, docs/benchmarks.md), else two_stage."""
    device = next(model.parameters()).device
    return "shared" if device.type == "cpu" and _shared_ok(model) else "two_stage"


def _candidate_logprobs(logits, rows: Sequence[Item]) -> list[list[float]]:
    import torch

    lp = torch.log_softmax(logits.float(), dim=-1)
    return [[float(lp[i, c]) for c in it.candidates] for i, it in enumerate(rows)]


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


class PackedScorer:
    """Runs one kernel form over groups of `Item`s on a transformers causal LM."""

    def __init__(self, model: Any, *, form: str = "auto", token_budget: int = 8192, prefill_chunk: int = 1024):
        if form not in KERNEL_FORMS:
            raise ValueError(f"unknown kernel form {form!r}; choose from {', '.join(KERNEL_FORMS)}")
        self.model = model
        self.device = next(model.parameters()).device
        if form != "single":
            check_attention_only(model.config)
        self.window = sliding_window(model.config)
        # auto: shared where the model allows it (see _auto_form), else two_stage: on an H200 (8B-shaped
        # Llama, bf16, 8 reports × 20 rubrics, prefix 5000) two_stage ran 1.8× faster than packing the
        # reports into one sequence under a FlexAttention mask (docs/benchmarks.md).
        self.form = _auto_form(model) if form == "auto" else form
        if self.form == "shared" and not _shared_ok(model):
            raise UnsupportedModelError("kernel form 'shared' needs an attention-only model without sliding "
                                        "windows or softcapping; use two_stage")
        self.token_budget = token_budget
        # A long prefix runs in chunks of this many tokens over the KV cache, so a stop request
        # (SIGTERM) is honoured within one chunk's time instead of one whole-report forward.
        self.prefill_chunk = max(1, prefill_chunk)
        self.stats = KernelStats()
        self.rows = None  # the shared form's own layer loop, where the model allows it (serving.engines.packed_rows)
        if self.form == "shared":
            from .packed_rows import RowsForward, supported

            self.rows = RowsForward(model) if supported(model) else None

    def score(self, groups: Sequence[Sequence[Item]]) -> list[list[list[float]]]:
        """Candidate log-probs for every item of every group, in input order."""
        import torch

        t0 = time.perf_counter()
        with torch.inference_mode():
            if self.form == "two_stage":
                out = [self._two_stage(items) for items in groups]
            elif self.form == "shared":
                out = [self._shared(items) for items in groups]
            else:
                out = [[self._single(it) for it in items] for items in groups]
        self.stats.prompt_tokens += sum(len(it.ids) for items in groups for it in items)
        self.stats.decisions += sum(len(items) for items in groups)
        self.stats.seconds += time.perf_counter() - t0
        return out

    def _tensor(self, rows: Sequence[Sequence[int]]):
        import torch

        return torch.tensor(rows, dtype=torch.long, device=self.device)

    def _two_stage(self, items: Sequence[Item]) -> list[list[float]]:
        import copy

        from transformers import DynamicCache

        p = common_prefix_len([it.ids for it in items])
        cache = None
        if p > 0:
            cache = DynamicCache()  # full-length layers even for windowed models: our mask applies the window
            for a in range(0, p, self.prefill_chunk):
                stop.check()
                chunk = items[0].ids[a : min(p, a + self.prefill_chunk)]
                self.model(input_ids=self._tensor([chunk]), past_key_values=cache, use_cache=True, logits_to_keep=1)
                self.stats.add("two_stage", len(chunk))
            stop.check()
        suffixes = [it.ids[p:] for it in items]
        width = max(len(s) for s in suffixes)
        # Each row of a batch holds its own copy of the prefix's KV (the cache is repeated per row),
        # so the budget counts prefix + suffix per row: memory is bounded by it, not by the rubrics.
        chunk = max(1, self.token_budget // (p + width))
        out: list[list[float]] = []
        for start in range(0, len(items), chunk):
            part = suffixes[start : start + chunk]
            c = None
            if cache is not None:
                c = copy.deepcopy(cache) if len(items) > chunk else cache
                c.batch_repeat_interleave(len(part))
            out += self._batch(part, items[start : start + chunk], offset=p, cache=c)
            decided(len(part))
        return out

    def _shared(self, items: Sequence[Item]) -> list[list[float]]:
        """The prefix's KV once (batch 1, in chunks), then the suffixes in batches of rows whose attention
        reads that one KV (left-padded, so every row's last token is the batch's last column). The budget
        counts the prefix once and each row's suffix: prefix + rows × width ≤ token_budget."""
        from .shared_attention import SharedPrefixKV, left_padded, prefill_kv, register, row_chunks

        p = common_prefix_len([it.ids for it in items])
        if self.rows is not None:
            return self._shared_rows(items, p)
        prefix = prefill_kv(self.model, items[0].ids[:p], self.prefill_chunk)
        if p:
            self.stats.add("shared", p)
        before = self.model.config._attn_implementation
        self.model.set_attn_implementation(register())
        # rows by suffix length, so that a batch pads its rows to a similar width (results go back in input order)
        order = sorted(range(len(items)), key=lambda k: len(items[k].ids))
        out: list[list[float]] = [[] for _ in items]
        try:
            for part in row_chunks([len(items[k].ids) - p for k in order], p, self.token_budget):
                stop.check()
                part = [order[k] for k in part]
                rows = [items[k] for k in part]
                ids, pos, mask, width = left_padded([it.ids[p:] for it in rows], p, self.device)
                st = SharedPrefixKV(prefix, len(rows), width, self.token_budget)
                logits = self.model(input_ids=ids, position_ids=pos, attention_mask=mask, use_cache=False,
                                    logits_to_keep=1, shared_prefix=st).logits[:, -1]
                self.stats.add("shared", len(rows) * width)
                for k, lp in zip(part, _candidate_logprobs(logits, rows)):
                    out[k] = lp
                decided(len(rows))
        finally:
            self.model.set_attn_implementation(before)  # the model is shared with other forms and generate mode
        return out

    def _shared_rows(self, items: Sequence[Item], p: int) -> list[list[float]]:
        """`shared` on the packed-rows loop: the prefix's KV once, then the suffixes end to end (no padding) in
        batches of prefix + their tokens ≤ token_budget, each reading that one KV."""
        kv = self.rows.prefix(items[0].ids[:p], self.prefill_chunk)
        if p:
            self.stats.add("shared", p)
        out: list[list[float]] = []
        for part in token_chunks([len(it.ids) - p for it in items], p, self.token_budget):
            stop.check()
            rows = [items[k] for k in part]
            logits = self.rows.rows([it.ids[p:] for it in rows], p, kv)
            self.stats.add("shared", sum(len(it.ids) - p for it in rows))
            out += _candidate_logprobs(logits, rows)
            decided(len(rows))
        return out

    def _batch(self, rows: Sequence[Sequence[int]], items: Sequence[Item], *, offset: int, cache: Any) -> list[list[float]]:
        """Right-padded batch continuing after `offset` cached tokens; logits at each row's end."""
        import torch

        width = max(len(r) for r in rows)
        ids = self._tensor([list(r) + [0] * (width - len(r)) for r in rows])
        pos = (torch.arange(width, device=self.device) + offset).expand(len(rows), -1)
        # Rows are right-padded, so one causal mask (offset by the cached prefix) serves the
        # whole batch: a real token never sees the padding after it. Broadcasting it over the
        # batch keeps the mask tiny; the window applies when the model uses one.
        q = torch.arange(width, device=self.device)[:, None] + offset
        k = torch.arange(offset + width, device=self.device)[None, :]
        allowed = k <= q
        if self.window is not None:
            allowed &= (q - k) < self.window
        attn = allowed[None, None]
        ends = [len(r) - 1 for r in rows]
        keep = sorted(set(ends))
        out = self.model(
            input_ids=ids, attention_mask=attn, position_ids=pos, past_key_values=cache,
            use_cache=cache is not None, logits_to_keep=self._tensor(keep),
        )
        self.stats.add(self.form, len(rows) * width)
        col = {e: i for i, e in enumerate(keep)}
        logits = out.logits[torch.arange(len(rows), device=self.device), self._tensor([col[e] for e in ends])]
        return _candidate_logprobs(logits, items)

    def _single(self, it: Item) -> list[float]:
        stop.check()
        out = self.model(input_ids=self._tensor([it.ids]), use_cache=False, logits_to_keep=1)
        self.stats.add("single", len(it.ids))
        decided(1)
        return _candidate_logprobs(out.logits[0], [it])[0]
