"""The `vllm` backend: an in-process vLLM engine fed token ids, scoring choices from sampled-position logprobs.

Request building and output parsing are plain functions over plain values, so they are tested
on CPU with stand-ins for vLLM's output objects; only `VLLMEngine.__init__` imports vllm.

Choice scoring runs each prompt with `max_tokens=1` and reads the candidate tokens' log-probs
at that one sampled position, with prefix caching on: the rubric prompts of a report share
their prefix, so after the first one the report is read from the cache. Prompt logprobs are
never requested: they make vLLM skip prefix-cache reads. Candidates are the first token where
the choices differ (`serving.chat.choice_group_items`), so hf and vllm score the same token ids:
template text tokenized with its control tokens, data never as one, fitted to the engine's
`max_model_len` (head and tail of the report kept, the elided count returned).
Where the installed vLLM has `SamplingParams.logprob_token_ids` the exact candidate log-probs
come back; otherwise the top-k log-probs are read and a candidate outside them counts as -inf
(probability 0), and a prompt with no candidate in its top-k is an error.

Generation sends prompts as the same token ids hf builds (`serving.chat.chat_ids`), so the
rubric prompts of a report share their token-id prefix; with prefix caching on, each shared
prefix goes first as a one-token request, and the prompts then read it from the cache. A
request's `stop_after_json` cuts the returned text after its JSON object (vLLM decodes on to
EOS or max_tokens: it has no such stop).
"""

from __future__ import annotations

import hashlib
import inspect
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..chat import Item, chat_ids, choice_group_items, render_chat, softmax
from ..config import VLLMConfig
from ..decoding import json_stopped
from ..kernels.plan import common_prefix_len
from ..kernels.prefix_decode import plan_groups
from ..models.real_models import resolve_model_path
from ..protocol import ChatRequest, ChoiceGroup, ChoiceResult, Engine, EngineInfo, Generation


def clear_stray_vllm_env(environ: dict[str, str] | None = None) -> list[str]:
    """Drop `VLLM_DP_*` variables a launcher may have left: vLLM would read them as a
    data-parallel rank and wait for peers that never come. Returns the names removed."""
    env = os.environ if environ is None else environ
    names = [k for k in env if k.startswith("VLLM_DP_")]
    for k in names:
        del env[k]
    return names


def cpu_engine_kwargs(cfg: VLLMConfig) -> dict[str, Any]:
    """vLLM's CPU build: its threads bound to every allowed core (or `cpu_cores`), and a KV cache
    sized here when the config sets none (serving.engines.vllm_cpu)."""
    from transformers import AutoConfig

    from .vllm_cpu import cpu_setup

    hf_config = AutoConfig.from_pretrained(resolve_model_path(cfg.model), revision=cfg.revision,
                                           trust_remote_code=cfg.trust_remote_code)
    size = cpu_setup(cfg, hf_config)
    return {} if size is None else {"kv_cache_memory_bytes": size}


# -- request building (pure) ------------------------------------------------------
def engine_kwargs(cfg: VLLMConfig, *, cpu: bool = False) -> dict[str, Any]:
    """`vllm.LLM(**...)` from the model config; `cpu` for vLLM's CPU build (`vllm-cpu`).

    The executor is `uni` (one GPU) or `mp` (tensor parallel, worker processes), never `ray`:
    inside a Ray actor vLLM must not create a nested placement group.
    """
    kw: dict[str, Any] = {
        "model": resolve_model_path(cfg.model),
        "revision": cfg.revision,
        # "auto" means what it means for hf in this project (bf16 on GPU, fp32 on CPU), not the
        # checkpoint's dtype.
        "dtype": ("float32" if cpu else "bfloat16") if cfg.dtype == "auto" else cfg.dtype,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "distributed_executor_backend": "mp" if cfg.tensor_parallel_size > 1 else "uni",
        "gpu_memory_utilization": cfg.gpu_memory_utilization,
        "max_model_len": cfg.max_model_len,
        "enable_prefix_caching": cfg.enable_prefix_caching,
        "seed": cfg.seed,
        "load_format": cfg.load_format,
        "trust_remote_code": cfg.trust_remote_code,
        "enforce_eager": cfg.enforce_eager,
    }
    if cfg.kv_cache_gib is not None:
        kw["kv_cache_memory_bytes"] = int(cfg.kv_cache_gib * 2**30)
    return kw


def sampling_kwargs(req: ChatRequest, template_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """`vllm.SamplingParams(**...)` for a chat request; its `json_schema` as vLLM's structured outputs
    (`structured_outputs` holds the schema; the caller wraps it in StructuredOutputsParams), except for a
    model that thinks first (constraining its thinking would break it; see ChatRequest.json_schema)."""
    from ..grammar import thinks

    greedy = req.temperature <= 0
    kw: dict[str, Any] = {
        "temperature": 0.0 if greedy else req.temperature,
        "top_p": 1.0 if greedy else req.top_p,
        "max_tokens": req.max_tokens,
        "seed": req.seed,
        "stop": list(req.stop) or None,
    }
    if req.json_schema and not thinks({**(template_kwargs or {}), **req.chat_template_kwargs}):
        kw["structured_outputs"] = req.json_schema
    return kw


def choice_sampling_kwargs(item: Item, *, token_ids_supported: bool, top_k: int) -> dict[str, Any]:
    """`SamplingParams(**...)` that reads the next-token log-probs of `item`'s candidates (no prompt logprobs)."""
    kw: dict[str, Any] = {"max_tokens": 1, "temperature": 0.0}
    if token_ids_supported:
        kw["logprob_token_ids"] = list(item.candidates)
    else:
        kw["logprobs"] = top_k
    return kw


def token_prompt(ids: Sequence[int]) -> dict[str, list[int]]:
    """A vLLM `TokensPrompt` (a TypedDict, so a plain dict): the prompt as token ids, no re-tokenizing."""
    return {"prompt_token_ids": list(ids)}


def has_logprob_token_ids(sampling_params_cls: Any) -> bool:
    """Whether this vLLM's SamplingParams accepts `logprob_token_ids` (msgspec struct or plain class)."""
    fields = getattr(sampling_params_cls, "__struct_fields__", None)
    if fields is not None:
        return "logprob_token_ids" in fields
    try:
        return "logprob_token_ids" in inspect.signature(sampling_params_cls).parameters
    except (TypeError, ValueError):
        return False


def waves(groups: Sequence[Sequence[Item]], *, warm: bool) -> list[list[tuple[int, int]]]:
    """(group, item) positions to send, in order; with `warm`, each group's first prompt goes
    in a wave of its own before the rest.

    Prompts scheduled in the same engine step all compute their shared prefix; one prompt per
    report first fills the prefix cache that the report's other prompts then read.
    """
    everything = [(g, i) for g, items in enumerate(groups) for i in range(len(items))]
    if not warm:
        return [everything]
    first = [(g, 0) for g, items in enumerate(groups) if items]
    return [first, [(g, i) for g, i in everything if i > 0]]


def shared_prefixes(prompts: Sequence[Sequence[int]], *, min_tokens: int = 64) -> list[list[int]]:
    """The common token-id prefix of each group of prompts that share one (the rubric prompts of a
    report: template head, question and report), when at least `min_tokens` long.

    `generate` sends these first (one token each) so that the group's prompts, scheduled in the
    same engine step, read the prefix from the cache instead of each computing it.
    """
    out = []
    for group in plan_groups(prompts):
        if len(group) > 1:
            n = common_prefix_len([prompts[i] for i in group])
            if n >= min_tokens:
                out.append(list(prompts[group[0]][:n]))
    return out


# -- output parsing (pure) --------------------------------------------------------
def _logprob_value(entry: Any) -> float:
    return float(entry.logprob if hasattr(entry, "logprob") else entry)


def candidate_logprobs(output: Any, candidates: Sequence[int]) -> list[float]:
    """Log-probs of `candidates` at the first generated position of a RequestOutput; -inf where absent."""
    completions = getattr(output, "outputs", None) or []
    rows = getattr(completions[0], "logprobs", None) if completions else None
    if not rows:
        raise RuntimeError("vLLM returned no logprobs for a choice prompt (was logprobs/logprob_token_ids set?)")
    row = rows[0]
    if not isinstance(row, Mapping):
        raise RuntimeError(f"unexpected vLLM logprobs row type {type(row).__name__}")
    out = [_logprob_value(row[c]) if c in row else -math.inf for c in candidates]
    if all(v == -math.inf for v in out):
        raise RuntimeError(
            f"none of the candidate tokens {list(candidates)} is among the returned logprobs; "
            "use a vLLM with SamplingParams.logprob_token_ids or raise choice_top_k"
        )
    return out


def parse_generation(output: Any) -> Generation:
    """A Generation from a vLLM RequestOutput (text after the prompt; vLLM already cut the stop string)."""
    completions = getattr(output, "outputs", None) or []
    if not completions:
        raise RuntimeError("vLLM returned a request output without completions")
    c = completions[0]
    finish = {"stop": "stop", "length": "length"}.get(getattr(c, "finish_reason", None) or "", "error")
    return Generation(
        text=c.text,
        prompt_tokens=len(getattr(output, "prompt_token_ids", None) or []),
        output_tokens=len(getattr(c, "token_ids", None) or []),
        finish_reason=finish,
    )


def results_from(logprobs: Sequence[Sequence[float]]) -> list[ChoiceResult]:
    return [ChoiceResult(probs=softmax(lp), logprobs=list(lp)) for lp in logprobs]


def engine_max_len(llm: Any, cfg: VLLMConfig, tokenizer: Any) -> int | None:
    """Positions a prompt plus its output may take: the engine's `max_model_len`, else the config's
    cap, else the tokenizer's declared limit (None when nothing says)."""
    engine = getattr(getattr(llm, "llm_engine", None), "model_config", None)
    n = getattr(engine, "max_model_len", None)
    if isinstance(n, int):
        return n
    if cfg.max_model_len is not None:
        return cfg.max_model_len
    n = getattr(tokenizer, "model_max_length", None)
    return n if isinstance(n, int) and n < 10**8 else None


# -- the engine -------------------------------------------------------------------
class VLLMEngine(Engine):
    """vLLM's offline `LLM` engine: chat generation and prefix-cached choice scoring."""

    def __init__(self, cfg: VLLMConfig, *, llm: Any = None, sampling_params_cls: Any = None, tokenizer: Any = None):
        """`llm`, `sampling_params_cls` and `tokenizer` replace the real ones (tests on CPU)."""
        self.cpu = False
        if llm is None:
            clear_stray_vllm_env()
            import vllm
            from vllm.platforms import current_platform

            self.cpu = current_platform.is_cpu()
            kw = engine_kwargs(cfg, cpu=self.cpu)
            if self.cpu:
                kw.update(cpu_engine_kwargs(cfg))
            llm = vllm.LLM(**kw)
            sampling_params_cls = vllm.SamplingParams
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(cfg.model), revision=cfg.revision,
                                                      trust_remote_code=cfg.trust_remote_code)
        self.cfg, self.llm, self.sp, self.tokenizer = cfg, llm, sampling_params_cls, tokenizer
        self.token_ids_supported = has_logprob_token_ids(sampling_params_cls)
        self.max_positions = engine_max_len(llm, cfg, tokenizer)
        self.counters = {"generate_prompt_tokens": 0, "generate_output_tokens": 0, "choice_prompts": 0,
                      "choice_prompt_tokens": 0, "choice_cached_tokens": 0}


    def close(self) -> None:
        """Stop the engine's processes now rather than at garbage collection: the next phase may
        need their memory (and a CPU engine's worker keeps a core busy)."""
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        shutdown = getattr(core, "shutdown", None)
        if shutdown is not None:
            shutdown()

    def stats(self) -> dict[str, Any]:
        return dict(self.counters)

    def identity(self) -> EngineInfo:
        """vLLM's version and the dtype it was asked to load (choice scoring has no kernel form here)."""
        import vllm

        return EngineInfo(engine="vllm", weights_hash=self.model_hash(), version=vllm.__version__,
                          dtype=engine_kwargs(self.cfg, cpu=self.cpu)["dtype"])

    def model_hash(self) -> str:
        """Hash of the model reference and engine settings (vLLM loads the weights itself)."""
        kw = engine_kwargs(self.cfg, cpu=self.cpu)
        return hashlib.sha256(f"{kw['model']}|{kw['revision']}|{kw['dtype']}|{kw['load_format']}".encode()).hexdigest()[:16]

    def render(self, messages: list[dict], *, prefill: str = "", tools: list | None = None, **kwargs: Any) -> str:
        """The model's chat template up to the assistant turn, then the prefill (as the hf backend)."""
        return render_chat(self.tokenizer, messages, prefill=prefill, tools=tools, **kwargs)

    def score_choices(self, groups: Sequence[ChoiceGroup], choices: Sequence[str]) -> list[list[ChoiceResult]]:
        built = [choice_group_items(self.tokenizer, g, choices, self.max_positions) for g in groups]
        lps = self.score_items([items for items, _ in built])
        return [[r.model_copy(update={"truncated_tokens": cut}) for r in results_from(lp)]
                for lp, (_, cut) in zip(lps, built)]

    def score_items(self, items: Sequence[Sequence[Item]]) -> list[list[list[float]]]:
        """Candidate log-probs of every item of every group (token ids in, as the packed kernel takes them)."""
        lps: dict[tuple[int, int], list[float]] = {}
        for wave in waves(items, warm=self.cfg.enable_prefix_caching):
            if not wave:
                continue
            params = [self.sp(**choice_sampling_kwargs(items[g][i], token_ids_supported=self.token_ids_supported,
                                                       top_k=self.cfg.choice_top_k)) for g, i in wave]
            outs = self.llm.generate([token_prompt(items[g][i].ids) for g, i in wave], params, use_tqdm=False)
            for (g, i), out in zip(wave, outs):
                lps[(g, i)] = candidate_logprobs(out, items[g][i].candidates)
                self.counters["choice_prompt_tokens"] += len(items[g][i].ids)
                # Prefix-cache hits as the engine reports them: shows the report was read once.
                self.counters["choice_cached_tokens"] += getattr(out, "num_cached_tokens", None) or 0
        self.counters["choice_prompts"] += len(lps)
        return [[lps[(g, i)] for i in range(len(its))] for g, its in enumerate(items)]

    def _structured(self, kw: dict[str, Any]) -> dict[str, Any]:
        """A schema in `kw` as vLLM's StructuredOutputsParams (imported only when one is asked for)."""
        if "structured_outputs" in kw and isinstance(kw["structured_outputs"], dict):
            from vllm.sampling_params import StructuredOutputsParams

            kw["structured_outputs"] = StructuredOutputsParams(json=kw["structured_outputs"], disable_any_whitespace=True)
        return kw

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        fitted = [chat_ids(self.tokenizer, r, self.max_positions, self.cfg.chat_template_kwargs) for r in requests]
        prompts = [token_prompt(ids) for ids, _, _ in fitted]
        requests = [r.model_copy(update={"max_tokens": max(1, n)}) for r, (_, _, n) in zip(requests, fitted)]
        params = [self.sp(**self._structured(sampling_kwargs(r, self.cfg.chat_template_kwargs))) for r in requests]
        warm = shared_prefixes([ids for ids, _, _ in fitted]) if self.cfg.enable_prefix_caching else []
        if warm:
            self.llm.generate([token_prompt(w) for w in warm], [self.sp(max_tokens=1, temperature=0.0) for _ in warm],
                              use_tqdm=False)
        gens = [json_stopped(parse_generation(o), r.stop_after_json).model_copy(update={"truncated_tokens": cut})
                for o, r, (_, cut, _) in zip(self.llm.generate(prompts, params, use_tqdm=False), requests, fitted)]
        self.counters["generate_prompt_tokens"] += sum(g.prompt_tokens for g in gens)
        self.counters["generate_output_tokens"] += sum(g.output_tokens for g in gens)
        return gens
