"""Generation over a shared prompt prefix: the prefix prefilled once, its rows decoded as one batch over its KV.

The rubric prompts of one report repeat the report and differ in a short tail. Batched
`generate` with left padding keeps one copy of the report's KV per row. Here requests are
grouped by common token-id prefix; a group's prefix runs once (batch 1, in chunks) and its
KV is kept once; the rows' suffixes and generated tokens live in a preallocated per-row
buffer, and an attention function (registered under NAME) attends every row's queries to
the shared prefix KV and to the row's own suffix KV as one softmax over both (decoding
steps: two fused attentions merged by their log-sum-exp; the suffix prefill: fused SDPA over
the prefix repeated for a few rows at a time). Rows of a group
are decoded in chunks sized so that prefix plus rows × (suffix + max_new) stays within the
token budget: memory follows the budget, not the number of rubrics. Finished rows (EOS,
stop string, closed JSON object, length) leave the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._util import stop
from ..decoding import JsonObjectEnd, decode_generated, json_object_end
from . import plan as kplan
from .plan import common_prefix_len, shared_ok
from .shared_attention import SharedPrefixKV, prefill_kv, register


@dataclass
class Row:
    """One request to decode: prompt ids and when to stop."""

    ids: list[int]
    max_new: int
    stops: Sequence[str] = ()
    json_stop: bool = False
    schema: dict | None = None
    """Decode the answer under this JSON schema (serving.grammar); the row ends where the value closes."""
    think: bool = False
    """The model thinks first: the schema applies from the row's `</think>` on."""


@dataclass
class Constraint:
    """Per row of a chunk: its schema matcher (None: unconstrained or not started) and whether it waits for `</think>`."""

    matchers: list[Any]
    waiting: list[bool]


@dataclass
class Decoded:
    """What one row generated."""

    ids: list[int] = field(default_factory=list)
    """Generated ids, the EOS token included when one ended the row."""
    text: str = ""
    """Decoded text, cut after the JSON object when the row stopped there (stop strings are cut by the caller)."""
    finish: str = "length"
    """stop | length."""


def supported(model: Any) -> bool:
    """Attention-only decoders without a sliding window (others take the padded batch path)."""
    try:
        return shared_ok(model.config)
    except Exception:  # noqa: BLE001 - odd configs (a window that is no number) take the padded path too
        return False


def plan_groups(prompts: Sequence[Sequence[int]]) -> list[list[int]]:
    """Prompt indices grouped by shared prefix: in sorted order, a prompt joins the group before it
    while the group's common prefix keeps at least half its length (the rubrics of one report do;
    the next report, sharing only the template head and question, starts a new group)."""
    order = sorted(range(len(prompts)), key=lambda i: list(prompts[i]))
    groups: list[list[int]] = []
    lcp = 0
    for i in order:
        if groups:
            last = prompts[groups[-1][-1]]
            shared = min(lcp, common_prefix_len([last, prompts[i]]))
            if shared > 0 and shared >= lcp // 2:
                groups[-1].append(i)
                lcp = shared
                continue
        groups.append([i])
        lcp = max(len(prompts[i]) - 1, 0)
    return groups


def plan_chunks(rows: Sequence[Row], prefix: int, budget: int) -> list[list[int]]:
    """Consecutive row indices per decoding batch: prefix + rows × (longest suffix + max_new) ≤ budget
    (at least one row per batch: a row larger than the budget runs alone)."""
    chunks: list[list[int]] = []
    width = new = 0
    for i, r in enumerate(rows):
        w, n = max(width, len(r.ids) - prefix), max(new, r.max_new)
        if chunks and prefix + (len(chunks[-1]) + 1) * (w + n) <= budget:
            chunks[-1].append(i)
            width, new = w, n
        else:
            chunks.append([i])
            width, new = len(r.ids) - prefix, r.max_new
    return chunks


def next_tokens(logits: Any, temperature: float, top_p: float, generator: Any) -> Any:
    """Greedy (temperature 0) or temperature / nucleus sampling from (rows, vocab) logits."""
    import torch

    if temperature <= 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if top_p < 1.0:
        srt, idx = logits.sort(dim=-1, descending=True)
        probs = srt.softmax(dim=-1)
        drop = probs.cumsum(dim=-1) - probs > top_p  # the most likely token always stays
        logits = torch.full_like(logits, float("-inf")).scatter(-1, idx, srt.masked_fill(drop, float("-inf")))
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator).squeeze(-1)


class PrefixDecoder:
    """Decodes rows grouped by shared prefix (see the module docstring) on a transformers causal LM."""

    def __init__(self, model: Any, tokenizer: Any, *, token_budget: int, prefill_chunk: int | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.budget = token_budget
        self.prefill_chunk = max(1, kplan.PREFILL_CHUNK if prefill_chunk is None else prefill_chunk)
        self.device = next(model.parameters()).device
        eos = model.generation_config.eos_token_id
        eos = list(eos) if isinstance(eos, (list, tuple)) else [eos]
        self.eos = {int(i) for i in [tokenizer.eos_token_id, *eos] if i is not None}
        self.stats = {"prefix_tokens": 0, "suffix_tokens": 0, "decode_steps": 0, "batches": 0}
        self.masks = None  # serving.grammar.SchemaMasks, built on the first row with a schema

    def _constraint(self, rows: Sequence[Row]) -> Constraint:
        if any(r.schema for r in rows) and self.masks is None:
            from ..grammar import SchemaMasks

            self.masks = SchemaMasks(self.tokenizer, self.model.config.vocab_size, self.eos)
        return Constraint([self.masks.matcher(r.schema) if r.schema and not r.think else None for r in rows],
                          [bool(r.schema and r.think) for r in rows])

    def _constrain(self, logits: Any, batch: Sequence[int], con: Constraint, finished: set[int]) -> Any:
        """`logits` with each constrained row's tokens outside its schema at -inf."""
        from ..grammar import mask_logits

        allowed = {k: self.masks.allowed(con.matchers[i], logits.device) for k, i in enumerate(batch)
                   if i not in finished and con.matchers[i] is not None}
        return mask_logits(logits, allowed)

    def decode(self, rows: Sequence[Row], *, temperature: float = 0.0, top_p: float = 1.0,
               seed: int | None = None) -> list[Decoded]:
        """Generate every row; greedy rows give what decoding each alone gives."""
        import torch

        gen = None
        if temperature > 0:
            gen = torch.Generator(device=self.device)
            gen.manual_seed(0 if seed is None else seed)
        out: list[Decoded] = [Decoded() for _ in rows]
        with torch.inference_mode():
            for group in plan_groups([r.ids for r in rows]):
                members = [rows[i] for i in group]
                p = common_prefix_len([r.ids for r in members])
                prefix = self._prefill(members[0].ids[:p])
                before = self.model.config._attn_implementation
                self.model.set_attn_implementation(register())  # the model is shared: always restored
                try:
                    for chunk in plan_chunks(members, p, self.budget):
                        done = self._decode_chunk([members[k] for k in chunk], prefix, p, temperature, top_p, gen)
                        for k, d in zip(chunk, done):
                            out[group[k]] = d
                finally:
                    self.model.set_attn_implementation(before)
        return out

    def _tensor(self, rows: Any) -> Any:
        import torch

        return torch.tensor(rows, dtype=torch.long, device=self.device)

    def _prefill(self, ids: list[int]) -> list[tuple[Any, Any]]:
        """Per layer, the prefix's keys and values (kv_heads, len, head_dim), computed once in chunks."""
        self.stats["prefix_tokens"] += len(ids)
        return prefill_kv(self.model, ids, self.prefill_chunk)

    def _forward(self, ids: Any, pos: Any, mask: Any, st: SharedPrefixKV) -> Any:
        """Last-position logits of rows continuing over `st` (the model's attention is NAME meanwhile)."""
        out = self.model(input_ids=ids, position_ids=pos, attention_mask=mask, use_cache=False,
                         logits_to_keep=1, shared_prefix=st)
        st.cursor += ids.shape[1]
        return out.logits[:, -1]

    def _decode_chunk(self, rows: Sequence[Row], prefix: list[tuple[Any, Any]], p: int, temperature: float,
                      top_p: float, gen: Any) -> list[Decoded]:
        import torch

        suffixes = [r.ids[p:] for r in rows]
        w, n_new = max(len(s) for s in suffixes), max(r.max_new for r in rows)
        pad = self._tensor([w - len(s) for s in suffixes])
        ids = self._tensor([[0] * (w - len(s)) + s for s in suffixes])
        j = torch.arange(w, device=self.device)
        real = j[None, :] >= pad[:, None]  # left padding: a row's real suffix ends at w
        pos = (p + (j[None, :] - pad[:, None]).clamp(min=0))
        # padding queries see themselves, so no softmax row is empty (their outputs are never read)
        mask = ((j[None, :] <= j[:, None])[None] & real[:, None, :]) | torch.eye(w, dtype=torch.bool, device=self.device)
        st = SharedPrefixKV(prefix, len(rows), w + n_new, self.budget)
        logits = self._forward(ids, pos, mask[:, None], st)
        self.stats["suffix_tokens"] += sum(len(s) for s in suffixes)
        self.stats["batches"] += 1
        valid = torch.zeros((len(rows), w + n_new), dtype=torch.bool, device=self.device)
        valid[:, :w] = real
        nxt = self._tensor([p + len(s) for s in suffixes])
        res = [Decoded() for _ in rows]
        trackers = [JsonObjectEnd() if r.json_stop else None for r in rows]
        con = self._constraint(rows)
        batch = list(range(len(rows)))  # row index of each batch position
        finished: set[int] = set()
        while True:
            stop.check()
            toks = next_tokens(self._constrain(logits, batch, con, finished), temperature, top_p, gen)
            for i, t in zip(batch, toks.tolist()):
                if i not in finished and self._advance(rows[i], res[i], trackers[i], t, con, i):
                    finished.add(i)
            if len(finished) == len(rows):
                break
            valid[:, st.cursor] = True
            if 4 * sum(i in finished for i in batch) >= len(batch):  # drop finished rows in bulk (a copy)
                keep = self._tensor([k for k, i in enumerate(batch) if i not in finished])
                st.select(keep)
                valid, nxt, toks = valid[keep], nxt[keep], toks[keep]
                batch = [i for i in batch if i not in finished]
            logits = self._forward(toks[:, None], nxt[:, None], valid[:, None, None, : st.cursor + 1], st)
            nxt = nxt + 1
            self.stats["decode_steps"] += 1
        for r, d in zip(rows, res):
            d.text = decode_generated(self.tokenizer, d.ids)
            end = json_object_end(d.text) if r.json_stop else None
            d.text = d.text[:end] if end is not None else d.text
        return res

    def _advance(self, row: Row, res: Decoded, tracker: JsonObjectEnd | None, token: int,
                 con: Constraint | None = None, i: int = 0) -> bool:
        """Append `token` to row `i`; True once the row is finished."""
        res.ids.append(token)
        if token in self.eos:
            res.finish = "stop"
            return True
        con = con or Constraint([None] * (i + 1), [False] * (i + 1))
        m = con.matchers[i]
        if m is not None:
            m.consume_token(token)
            if m.is_accepting() or m.is_stopped() or m.is_error():  # the schema's value is complete
                res.finish = "stop"
                return True
        if row.stops or tracker is not None or con.waiting[i]:
            text = self.tokenizer.decode(res.ids, skip_special_tokens=True)
            if any(s and s in text for s in row.stops) or (tracker is not None and tracker.feed(text) is not None):
                res.finish = "stop"
                return True
            if con.waiting[i] and "</think>" in self.tokenizer.decode(res.ids):  # the answer starts: constrain it
                con.matchers[i], con.waiting[i] = self.masks.matcher(row.schema), False
        if len(res.ids) >= row.max_new:
            res.finish = "length"
            return True
        return False
