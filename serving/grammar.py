"""Schema-constrained decoding for the hf engine: a JSON schema as a per-token mask (llguidance).

A request with `json_schema` is decoded so that its answer can only be a JSON value of that
schema: before each token, the tokens that would leave the schema get -inf logits. A weak judge
that would write prose then still writes the verdict object, in one attempt, and stops where
the object closes. llguidance (no dependencies, no CUDA, CPU wheels) compiles the schema and the
tokenizer once; each row keeps its own matcher.

Thinking first: a row whose model thinks before answering (Qwen3 with `enable_thinking`, a
prompt that ends inside `<think>`) decodes freely until its `</think>`; the constraint starts
there, so the reasoning is never forced into JSON.
"""

from __future__ import annotations

import json
from typing import Any

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
COMPACT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def thinks(template_kwargs: dict[str, Any]) -> bool:
    """Whether the chat template was asked to let the model think first (Qwen3's `enable_thinking`)."""
    return template_kwargs.get("enable_thinking") is True


def in_thinking(prompt_tail: str) -> bool:
    """Whether a prompt ends inside an open thinking block (the model's answer continues the thinking)."""
    return prompt_tail.rfind(THINK_OPEN) > prompt_tail.rfind(THINK_CLOSE)


class SchemaMasks:
    """One compiled tokenizer for a model; matchers for JSON schemas over it (compiled once per schema)."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos: set[int]):
        try:
            from llguidance.hf import from_tokenizer
        except ImportError as e:  # a dependency of the project: a broken install, said plainly
            raise RuntimeError(f"json_schema decoding needs llguidance (pip install llguidance): {e}") from None
        self.vocab_size = vocab_size
        self.tok = from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=sorted(eos) or None)
        self.grammars: dict[str, str] = {}

    def matcher(self, schema: dict[str, Any]) -> Any:
        """A fresh matcher at the start of a value of `schema`."""
        from llguidance import LLMatcher

        key = json.dumps(schema, sort_keys=True)
        if key not in self.grammars:
            # compact, as the prompts show the object: whitespace the model may add between tokens costs
            # decoding steps and says nothing
            self.grammars[key] = LLMatcher.grammar_from_json_schema(schema, overrides=COMPACT)
        m = LLMatcher(self.tok, self.grammars[key], log_level=0)
        if m.is_error():
            raise ValueError(f"json_schema cannot be compiled: {m.get_error()}")
        return m

    def allowed(self, matcher: Any, device: Any) -> Any:
        """(vocab,) bool: the tokens `matcher` accepts next."""
        import torch

        words = torch.frombuffer(bytearray(matcher.compute_bitmask()), dtype=torch.int32)
        bits = (words[:, None] >> torch.arange(32, dtype=torch.int32)) & 1
        return bits.reshape(-1)[: self.vocab_size].to(device=device, dtype=torch.bool)


def mask_logits(logits: Any, allowed: dict[int, Any]) -> Any:
    """`logits` (rows, vocab) with every token outside row i's `allowed[i]` at -inf (rows not in it unchanged)."""
    if not allowed:
        return logits
    out = logits.clone()
    for i, ok in allowed.items():
        out[i, : ok.shape[0]] = out[i, : ok.shape[0]].masked_fill(~ok, float("-inf"))
        out[i, ok.shape[0] :] = float("-inf")
    return out


class SchemaLogitsProcessor:
    """The same mask for `model.generate` (the padded path): a transformers logits processor over a
    left-padded batch; rows without a matcher are left alone. Each call first feeds every row's
    previous token to its matcher."""

    def __init__(self, masks: SchemaMasks, matchers: list[Any]):
        self.masks, self.matchers, self.width = masks, matchers, None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.width is None:
            self.width = input_ids.shape[1]  # the prompt: nothing generated yet
        elif input_ids.shape[1] > self.width:
            for m, t in zip(self.matchers, input_ids[:, -1].tolist()):
                if m is not None and not (m.is_stopped() or m.is_error()):
                    m.consume_token(t)
        allowed = {i: self.masks.allowed(m, scores.device) for i, m in enumerate(self.matchers)
                   if m is not None and not m.is_error()}
        return mask_logits(scores, allowed)
