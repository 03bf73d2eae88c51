"""The `hf` backend: transformers on CPU or CUDA, hosting the packed judge kernel."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .config import ModelConfig
from .kernel import Item, PackedScorer
from .protocol import ChatRequest, ChoiceGroup, ChoiceResult, Generation
from .tiny import TINY_MODELS, build_tiny


def attn_implementation(device: str) -> str:
    """Our GQA-preserving SDPA on CPU (see serving.attention), stock SDPA elsewhere."""
    from .attention import register

    return register() if device == "cpu" else "sdpa"


def resolve_model_path(name: str, seed: int = 0) -> str:
    """tiny-* names become locally built models; anything else is a path or hub id."""
    return str(build_tiny(name, seed=seed)) if name in TINY_MODELS else name


def choice_items(tokenizer: Any, texts: Sequence[str], choices: Sequence[str]) -> list[Item]:
    """Token ids up to the first token where the choices differ, and each choice's token there.

    Each full text+choice is tokenized, because BPE merges can fuse a choice with what
    precedes it (`": true`): the decision is read at the first differing token, not at the
    end of the separately tokenized prompt.
    """
    if len(set(choices)) != len(choices) or len(choices) < 2:
        raise ValueError(f"need at least two distinct choices, got {list(choices)}")
    out = []
    for text in texts:
        seqs = tokenizer([text + c for c in choices], add_special_tokens=False)["input_ids"]
        d = 0
        shortest = min(len(s) for s in seqs)
        while d < shortest and all(s[d] == seqs[0][d] for s in seqs):
            d += 1
        if d == shortest:
            raise ValueError(f"choices {list(choices)} are not told apart by any token (one tokenizes as a prefix of another)")
        cands = [s[d] for s in seqs]
        if len(set(cands)) != len(cands):
            raise ValueError(f"choices {list(choices)} share their first distinguishing token; use choices that differ there")
        if d == 0:
            raise ValueError("empty scoring context: the prompt rendered to nothing")
        out.append(Item(ids=list(seqs[0][:d]), candidates=cands))
    return out


def render_chat(tokenizer: Any, messages: list[dict], *, prefill: str = "", tools: list | None = None,
                **kwargs: Any) -> str:
    """The chat template applied up to the assistant turn, then the prefill."""
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True, **kwargs)
    return text + prefill


def choice_texts(tokenizer: Any, group: ChoiceGroup) -> list[str]:
    """The rendered text of each request of a choice group, thinking disabled."""
    return [render_chat(tokenizer, r.messages, prefill=r.prefill, **{**r.chat_template_kwargs, "enable_thinking": False})
            for r in group.requests]


def softmax(xs: Sequence[float]) -> list[float]:
    import math

    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    s = sum(e)
    return [v / s for v in e]


class HFBackend:
    """A transformers causal LM with chat rendering, batched generation and packed choice scoring."""

    def __init__(self, cfg: ModelConfig):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.cfg = cfg
        device = cfg.device if cfg.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = {"auto": torch.bfloat16 if device == "cuda" else torch.float32, "float32": torch.float32,
                 "bfloat16": torch.bfloat16, "float16": torch.float16}[cfg.dtype]
        self.path = resolve_model_path(cfg.model, cfg.seed)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path, revision=cfg.revision, trust_remote_code=cfg.trust_remote_code)
        self.model = AutoModelForCausalLM.from_pretrained(
            self.path, revision=cfg.revision, dtype=dtype, attn_implementation=attn_implementation(device),
            trust_remote_code=cfg.trust_remote_code,
        ).to(device).eval()
        self.scorer = PackedScorer(self.model, form=cfg.kernel, token_budget=cfg.token_budget)
        self.stats = {"generate_prompt_tokens": 0, "generate_output_tokens": 0}

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> HFBackend:
        return cls(cfg)

    def model_hash(self) -> str:
        """Hash of the model's config and tokenizer files (identifies random tiny models too)."""
        h = hashlib.sha256(self.path.encode())
        p = Path(self.path)
        for name in ("config.json", "tokenizer.json", "model.safetensors"):
            if (p / name).is_file() and (p / name).stat().st_size < (1 << 28):
                h.update((p / name).read_bytes())
        return h.hexdigest()[:16]

    def render(self, messages: list[dict], *, prefill: str = "", tools: list | None = None, **kwargs: Any) -> str:
        """The chat template applied up to the assistant turn, then the prefill."""
        return render_chat(self.tokenizer, messages, prefill=prefill, tools=tools, **kwargs)

    # -- choice scoring -------------------------------------------------------------
    def score_choices(self, groups: Sequence[ChoiceGroup], choices: Sequence[str]) -> list[list[ChoiceResult]]:
        items = [choice_items(self.tokenizer, choice_texts(self.tokenizer, g), choices) for g in groups]
        lps = self.scorer.score(items)
        return [[ChoiceResult(probs=softmax(lp), logprobs=lp) for lp in group] for group in lps]

    # -- generation -----------------------------------------------------------------
    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        out: list[Generation | None] = [None] * len(requests)
        buckets: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            buckets.setdefault((r.max_tokens, r.temperature, r.top_p, r.seed), []).append(i)
        for idxs in buckets.values():
            for i, g in zip(idxs, self._generate_batch([requests[i] for i in idxs])):
                out[i] = g
        return [g for g in out if g is not None]

    def _generate_batch(self, reqs: Sequence[ChatRequest]) -> list[Generation]:
        import torch

        r0 = reqs[0]
        texts = [self.render(r.messages, prefill=r.prefill, tools=r.tools,
                             **{**self.cfg.chat_template_kwargs, **r.chat_template_kwargs}) for r in reqs]
        self.tokenizer.padding_side = "left"
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.model.device)
        if r0.seed is not None:
            torch.manual_seed(r0.seed)
        sample = r0.temperature > 0
        with torch.inference_mode():
            gen = self.model.generate(
                **enc, max_new_tokens=r0.max_tokens, do_sample=sample,
                temperature=r0.temperature if sample else None, top_p=r0.top_p if sample else None,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        results = []
        eos = self.tokenizer.eos_token_id
        for row, req, n_in in zip(gen[:, enc["input_ids"].shape[1]:], reqs, enc["attention_mask"].sum(1).tolist()):
            ids = row.tolist()
            n_out = ids.index(eos) + 1 if eos in ids else len([t for t in ids if t != self.tokenizer.pad_token_id])
            text = self.tokenizer.decode(ids[:n_out], skip_special_tokens=True)
            text, stopped = _cut_at_stop(text, req.stop)
            finish = "stop" if (eos in ids or stopped) else "length"
            self.stats["generate_prompt_tokens"] += n_in
            self.stats["generate_output_tokens"] += n_out
            results.append(Generation(text=text, prompt_tokens=n_in, output_tokens=n_out, finish_reason=finish))
        return results


def _cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    cuts = [text.find(s) for s in stops if s and s in text]
    return (text[: min(cuts)], True) if cuts else (text, False)
