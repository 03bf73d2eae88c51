"""The `hf` backend: transformers on CPU or CUDA, hosting the packed judge kernel."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .._util import stop
from .._util.threads import fit_torch_threads
from ..chat import (
    Item,
    chat_ids,
    check_choices,
    choice_group_items,
    context_limit,
    decision_item,
    render_chat,
    softmax,
)
from ..config import HFConfig
from ..decoding import decode_generated, json_object_end
from ..kernels.kernel import PackedScorer
from ..models.real_models import resolve_model_path
from ..protocol import ChatRequest, ChoiceGroup, ChoiceResult, Engine, EngineInfo, Generation

log = logging.getLogger(__name__)


def attn_implementation(device: str) -> str:
    """Our GQA-preserving SDPA on CPU (see serving.kernels.attention), stock SDPA elsewhere."""
    from ..kernels.attention import register

    return register() if device == "cpu" else "sdpa"


def choice_items(tokenizer: Any, texts: Sequence[str], choices: Sequence[str]) -> list[Item]:
    """Token ids up to the first token where the choices differ, and each choice's token there.

    Each full text+choice is tokenized, because BPE merges can fuse a choice with what
    precedes it (`": true`): the decision is read at the first differing token, not at the
    end of the separately tokenized prompt. For already-rendered text (benchmarks, tests);
    the backends build their items from messages with `serving.chat.choice_group_items`.
    """
    check_choices(choices)
    return [decision_item(tokenizer([text + c for c in choices], add_special_tokens=False)["input_ids"], choices)
            for text in texts]


class HFEngine(Engine):
    """A transformers causal LM with chat rendering, batched generation and packed choice scoring."""

    def __init__(self, cfg: HFConfig):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.cfg = cfg
        device = cfg.device if cfg.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        if device == "cpu":
            fit_torch_threads()
        dtype = {"auto": torch.bfloat16 if device == "cuda" else torch.float32, "float32": torch.float32,
                 "bfloat16": torch.bfloat16, "float16": torch.float16}[cfg.dtype]
        if device == "cpu" and cfg.dtype in ("bfloat16", "float16"):
            _warn_if_emulated(cfg.dtype)
        self.path = resolve_model_path(cfg.model)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path, revision=cfg.revision, trust_remote_code=cfg.trust_remote_code)
        self.model = AutoModelForCausalLM.from_pretrained(
            self.path, revision=cfg.revision, dtype=dtype, attn_implementation=attn_implementation(device),
            trust_remote_code=cfg.trust_remote_code,
        ).to(device).eval()
        self.scorer = PackedScorer(self.model, form=cfg.kernel, token_budget=cfg.token_budget)
        self.max_positions = context_limit(self.model.config, cfg.max_model_len)
        self.counters = {"generate_prompt_tokens": 0, "generate_output_tokens": 0}
        self.decoder = None
        self.masks = None  # serving.grammar.SchemaMasks for the padded path, built on first use
        if cfg.generate_form == "shared_prefix":
            from ..kernels.prefix_decode import PrefixDecoder, supported

            if supported(self.model):
                self.decoder = PrefixDecoder(self.model, self.tokenizer, token_budget=cfg.token_budget)


    def model_hash(self) -> str:
        """Hash of the model's config and tokenizer files (identifies random tiny models too)."""
        h = hashlib.sha256(self.path.encode())
        p = Path(self.path)
        for name in ("config.json", "tokenizer.json", "model.safetensors"):
            if (p / name).is_file() and (p / name).stat().st_size < (1 << 28):
                h.update((p / name).read_bytes())
        return h.hexdigest()[:16]

    def identity(self) -> EngineInfo:
        """transformers' version, the weights' dtype as loaded, and the packed kernel's form."""
        import transformers

        return EngineInfo(engine="hf", weights_hash=self.model_hash(), version=transformers.__version__,
                          dtype=str(self.model.dtype).removeprefix("torch."), kernel_form=self.scorer.form)

    def stats(self) -> dict[str, Any]:
        """Generation token counts, and the packed kernel's work once it has scored something."""
        out: dict[str, Any] = dict(self.counters)
        k = self.scorer.stats
        if k.decisions:
            out.update(kernel_form=self.scorer.form, forward_tokens=k.forward_tokens, prompt_tokens=k.prompt_tokens,
                       forward_passes=k.passes, kernel_seconds=k.seconds)
            if self.scorer.rows is not None:  # "amx" (compiled bf16 kernels) or "flash" (torch's): bf16 p_true differ
                out["kernel_attention"] = self.scorer.rows.attention
        return out

    def render(self, messages: list[dict], *, prefill: str = "", tools: list | None = None, **kwargs: Any) -> str:
        """The chat template applied up to the assistant turn, then the prefill."""
        return render_chat(self.tokenizer, messages, prefill=prefill, tools=tools, **kwargs)

    # -- choice scoring -------------------------------------------------------------
    def score_choices(self, groups: Sequence[ChoiceGroup], choices: Sequence[str]) -> list[list[ChoiceResult]]:
        built = [choice_group_items(self.tokenizer, g, choices, self.max_positions) for g in groups]
        lps = self.scorer.score([items for items, _ in built])
        return [[ChoiceResult(probs=softmax(lp), logprobs=lp, truncated_tokens=cut) for lp in group]
                for group, (_, cut) in zip(lps, built)]

    def iter_score_choices(
        self, groups: Sequence[ChoiceGroup], choices: Sequence[str]
    ) -> Iterator[tuple[list[int], list[list[ChoiceResult]]]]:
        """`score_choices`, yielding (group indices, their results) as soon as they exist, so a
        caller can save them before a kill: group by group, as the kernel runs them anyway."""
        for i, group in enumerate(groups):
            yield [i], self.score_choices([group], choices)

    # -- generation -----------------------------------------------------------------
    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        out: list[Generation | None] = [None] * len(requests)
        buckets: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            buckets.setdefault((r.max_tokens, r.temperature, r.top_p, r.seed), []).append(i)
        run = self._generate_shared if self.decoder is not None else self._generate_batch
        for idxs in buckets.values():
            for i, g in zip(idxs, run([requests[i] for i in idxs])):
                out[i] = g
        return [g for g in out if g is not None]

    def _generate_shared(self, reqs: Sequence[ChatRequest]) -> list[Generation]:
        """Requests of one sampling setting through serving.kernels.prefix_decode (shared prefixes prefilled once)."""
        from ..kernels.prefix_decode import Row

        r0 = reqs[0]
        fitted = [chat_ids(self.tokenizer, r, self.max_positions, self.cfg.chat_template_kwargs) for r in reqs]
        rows = [Row(ids=ids, max_new=max(1, n), stops=r.stop, json_stop=r.stop_after_json, schema=r.json_schema,
                    think=bool(r.json_schema) and self._thinks(r, ids)) for r, (ids, _, n) in zip(reqs, fitted)]
        stop.check()
        done = self.decoder.decode(rows, temperature=r0.temperature, top_p=r0.top_p, seed=r0.seed)
        out = []
        for req, (ids_in, cut, _), d in zip(reqs, fitted, done):
            text, stopped = _cut_at_stop(d.text, req.stop)
            out.append(self._generation(text, len(ids_in), len(d.ids), "stop" if stopped else d.finish, cut))
        return out

    def _schema_processor(self, reqs: Sequence[ChatRequest], fitted: Sequence[tuple]) -> Any:
        """The padded path's schema mask (None when no request has a schema; a row that thinks first stays free)."""
        if not any(r.json_schema for r in reqs):
            return None
        from transformers import LogitsProcessorList

        from ..grammar import SchemaLogitsProcessor, SchemaMasks

        if self.masks is None:
            eos = {self.tokenizer.eos_token_id} - {None}
            self.masks = SchemaMasks(self.tokenizer, self.model.config.vocab_size, eos)
        matchers = [self.masks.matcher(r.json_schema) if r.json_schema and not self._thinks(r, ids) else None
                    for r, (ids, _, _) in zip(reqs, fitted)]
        return LogitsProcessorList([SchemaLogitsProcessor(self.masks, matchers)])

    def _thinks(self, req: ChatRequest, ids: list[int]) -> bool:
        """Whether the model thinks before this request's answer (the schema then waits for `</think>`)."""
        from ..grammar import in_thinking, thinks

        return thinks({**self.cfg.chat_template_kwargs, **req.chat_template_kwargs}) or \
            in_thinking(self.tokenizer.decode(ids[-8:]))

    def _generation(self, text: str, n_in: int, n_out: int, finish: str, cut: int) -> Generation:
        self.counters["generate_prompt_tokens"] += n_in
        self.counters["generate_output_tokens"] += n_out
        return Generation(text=text, prompt_tokens=n_in, output_tokens=n_out, finish_reason=finish, truncated_tokens=cut)

    def _generate_batch(self, reqs: Sequence[ChatRequest]) -> list[Generation]:
        """The padded path: `model.generate` over a left-padded batch of whole prompts."""
        import torch

        r0 = reqs[0]
        fitted = [chat_ids(self.tokenizer, r, self.max_positions, self.cfg.chat_template_kwargs) for r in reqs]
        width = max(len(ids) for ids, _, _ in fitted)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        rows = [[pad] * (width - len(ids)) + ids for ids, _, _ in fitted]  # left padding
        mask = [[0] * (width - len(ids)) + [1] * len(ids) for ids, _, _ in fitted]
        dev = self.model.device
        enc = {"input_ids": torch.tensor(rows, device=dev), "attention_mask": torch.tensor(mask, device=dev)}
        if r0.seed is not None:
            torch.manual_seed(r0.seed)
        sample = r0.temperature > 0
        stop.check()
        with torch.inference_mode():
            gen = self.model.generate(
                **enc, max_new_tokens=max(1, min(n for _, _, n in fitted)), do_sample=sample,
                temperature=r0.temperature if sample else None, top_p=r0.top_p if sample else None,
                pad_token_id=pad, stopping_criteria=_stop_criteria(), logits_processor=self._schema_processor(reqs, fitted),
            )
        stop.check()
        results = []
        eos = self.tokenizer.eos_token_id
        for row, req, (ids_in, cut, _) in zip(gen[:, width:], reqs, fitted):
            ids = row.tolist()
            n_out = ids.index(eos) + 1 if eos in ids else len([t for t in ids if t != pad])
            text = decode_generated(self.tokenizer, ids[:n_out])  # no U+FFFD from split characters
            text, stopped = _cut_at_stop(text, req.stop)
            end = json_object_end(text) if req.stop_after_json else None
            text = text[:end] if end is not None else text
            finish = "stop" if (eos in ids or stopped or end is not None) else "length"
            results.append(self._generation(text, len(ids_in), n_out, finish, cut))
        return results


def _warn_if_emulated(dtype: str) -> None:
    """bf16 on CPU is an opt-in that pays only with bf16 matrix instructions; say so where they are missing."""
    from .._util.cpu_features import BF16_FLAGS, bf16_native

    if bf16_native() is False:
        log.warning("dtype %s on a CPU without %s: torch emulates its matrix multiplies, tens of times slower "
                    "than float32 (docs/history.md); float32 is the faster choice here", dtype, "/".join(BF16_FLAGS))


def _stop_criteria():
    """Ends generation at the next token once a stop is requested (the caller then raises `Stopped`)."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class _Stop(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), stop.requested(), dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([_Stop()])


def _cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    cuts = [text.find(s) for s in stops if s and s in text]
    return (text[: min(cuts)], True) if cuts else (text, False)
