"""The packed judge kernel: score many prompts that share a prefix in one forward pass.

All rubric prompts of one report (a group) share a long prefix (template head + question +
report) and differ in a short suffix. The prefix runs once; each suffix sees the whole prefix
and itself causally, never another suffix, its positions continuing after the prefix, and
logits are computed only at each suffix's last token. Groups run one at a time.

Forms (the packed ones must equal scoring each prompt alone; tests check it):
- `two_stage`: the prefix once with its KV cache, then the suffixes in batches over that
  cache (each row of a batch holds a copy of the prefix's KV);
- `shared`: the prefix once, then all suffixes as one batch whose attention reads the one
  prefix KV for every row (serving.kernels.shared_attention: no per-row copy, an exact
  log-sum-exp merge with each row's own keys), so a report's rubrics stay in one batch
  whatever the prefix length; attention-only models without sliding windows;
- `single`: every prompt alone, batch size 1: the reference of the tests, the baseline of
  `lifesearch bench judge`, and the one form for hybrid and linear-attention models.

Removed, once measured slower: `dense` and `flex` (one packed sequence of several reports under a 4D or a
FlexAttention block mask; slower than two_stage on CPU and on an H200, docs/history.md) and
`naive` (every full prompt in padded batches: `single` computes the same without padding).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._util import stop
from ..chat import Item
from ..config import KERNEL_FORMS
from ..progress_hook import decided
from ..protocol import UnsupportedModelError
from . import plan as kplan
from .plan import GroupPlan, check_attention_only, plan_group, shared_ok, sliding_window


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


def _candidate_logprobs(logits, rows: Sequence[Item]) -> list[list[float]]:
    import torch

    lp = torch.log_softmax(logits.float(), dim=-1)
    return [[float(lp[i, c]) for c in it.candidates] for i, it in enumerate(rows)]


class PackedScorer:
    """Runs one kernel form over groups of `Item`s on a transformers causal LM."""

    def __init__(self, model: Any, *, form: str = "auto", token_budget: int | None = None,
                 prefill_chunk: int | None = None):
        if form not in KERNEL_FORMS:
            raise ValueError(f"unknown kernel form {form!r}; choose from {', '.join(KERNEL_FORMS)}")
        self.model = model
        self.device = next(model.parameters()).device
        if form != "single":
            check_attention_only(model.config)
        self.window = sliding_window(model.config)
        # auto: shared where the model allows it (serving.kernels.plan.choice_form), else two_stage: on an H200
        # (8B-shaped Llama, bf16, 8 reports × 20 rubrics, prefix 5000) two_stage ran 1.8× faster than packing
        # the reports into one sequence under a FlexAttention mask (docs/history.md).
        self.form = kplan.choice_form(form, model.config, self.device.type)
        if self.form == "shared" and not shared_ok(model.config):
            raise UnsupportedModelError("kernel form 'shared' needs an attention-only model without sliding "
                                        "windows or softcapping; use two_stage")
        # read when built, so that the plan's defaults hold for kernel and estimate alike
        self.token_budget = kplan.TOKEN_BUDGET if token_budget is None else token_budget
        self.prefill_chunk = max(1, kplan.PREFILL_CHUNK if prefill_chunk is None else prefill_chunk)
        self.stats = KernelStats()
        self.rows = None  # the shared form's own layer loop, where the model allows it (serving.kernels.packed_rows)
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

    def plan(self, items: Sequence[Item]) -> GroupPlan:
        """This scorer's passes for one group (serving.kernels.plan: what the estimate counts)."""
        return plan_group([it.ids for it in items], self.form, self.token_budget, rows_loop=self.rows is not None,
                          chunk=self.prefill_chunk)

    def _two_stage(self, items: Sequence[Item]) -> list[list[float]]:
        import copy

        from transformers import DynamicCache

        plan = self.plan(items)
        p = plan.prefix
        cache = None
        if p > 0:
            cache = DynamicCache()  # full-length layers even for windowed models: our mask applies the window
            for a, b in plan.prefill:
                stop.check()
                chunk = items[0].ids[a:b]
                self.model(input_ids=self._tensor([chunk]), past_key_values=cache, use_cache=True, logits_to_keep=1)
                self.stats.add("two_stage", len(chunk))
            stop.check()
        suffixes = [it.ids[p:] for it in items]
        # Each row of a batch holds its own copy of the prefix's KV (the cache is repeated per row),
        # so the plan's budget counts prefix + suffix per row: memory is bounded by it, not by the rubrics.
        out: list[list[float]] = []
        for batch in plan.batches:
            part = [suffixes[k] for k in batch]
            c = None
            if cache is not None:
                c = copy.deepcopy(cache) if len(plan.batches) > 1 else cache
                c.batch_repeat_interleave(len(part))
            out += self._batch(part, [items[k] for k in batch], offset=p, cache=c)
            decided(len(part))
        return out

    def _shared(self, items: Sequence[Item]) -> list[list[float]]:
        """The prefix's KV once (batch 1, in chunks), then the suffixes in batches of rows whose attention
        reads that one KV (left-padded, so every row's last token is the batch's last column). The budget
        counts the prefix once and each row's suffix: prefix + rows × width ≤ token_budget."""
        from .shared_attention import SharedPrefixKV, left_padded, prefill_kv, register

        plan = self.plan(items)
        p = plan.prefix
        if self.rows is not None:
            return self._shared_rows(items, plan)
        prefix = prefill_kv(self.model, items[0].ids[:p], self.prefill_chunk)
        if p:
            self.stats.add("shared", p)
        before = self.model.config._attn_implementation
        self.model.set_attn_implementation(register())
        # the plan takes rows by suffix length, so that a batch pads its rows to a similar width (results go
        # back in input order)
        out: list[list[float]] = [[] for _ in items]
        try:
            for part in plan.batches:
                stop.check()
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

    def _shared_rows(self, items: Sequence[Item], plan: GroupPlan) -> list[list[float]]:
        """`shared` on the packed-rows loop: the prefix's KV once, then the suffixes end to end (no padding) in
        batches of prefix + their tokens ≤ token_budget, each reading that one KV."""
        p = plan.prefix
        kv = self.rows.prefix(items[0].ids[:p], self.prefill_chunk)
        if p:
            self.stats.add("shared", p)
        out: list[list[float]] = []
        for part in plan.batches:
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
