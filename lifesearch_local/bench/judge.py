"""`bench judge`: the packed judge kernel vs one prompt per rubric (and vLLM's prefix caching), same inputs, one run."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

from lifesearch_local.bench import columns, rates
from lifesearch_local.bench.columns import SHAPES
from lifesearch_local.bench.settings import JudgeBench

# Dense bf16 peak (no sparsity) by device-name fragment, for the fraction-of-peak figure.
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}


def make_groups(vocab: int, k: int, n: int, p: int, s: int, seed: int):
    from serving import Item

    rng = random.Random(seed)
    lo = 16  # keep clear of special tokens
    groups = []
    for _ in range(k):
        prefix = [rng.randrange(lo, vocab) for _ in range(p)]
        groups.append([Item(prefix + [rng.randrange(lo, vocab) for _ in range(s)], [lo + 1, lo + 2]) for _ in range(n)])
    return groups


def real_groups(args: JudgeBench) -> tuple[list, dict, list]:
    """Token-id groups of real judge prompts (one group per report of --reports-from), their shape, and
    the reports as the judge's pending work."""
    from pathlib import Path

    from transformers import AutoConfig, AutoTokenizer

    from lifesearch_local.errors import InputError
    from lifesearch_local.judge.rubric import CHOICES, Pending, choice_group, judged_rubrics
    from lifesearch_local.llm.models import resolved_path
    from lifesearch_local.records import Report
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks
    from serving import choice_group_items, common_prefix_len, context_limit

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


def measure(args: JudgeBench, say: Callable[[str], None] | None = None) -> dict:
    """Every column on the same inputs: warm-up, repeats, min/median/max, the load average around it."""
    import torch

    from lifesearch_local.bench.timing import load_average
    from serving import contention, fit_torch_threads

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    busy = contention(fit_torch_threads()).line() if device == "cpu" else None
    real = real_groups(args) if args.reports_from else None  # bad input fails before the model loads
    shape = real[1] if real else {"prefix_tokens": args.prefix_tokens, "rubrics": args.rubrics,
                                  "suffix_tokens": args.suffix_tokens, "reports": args.reports}
    decisions = real[1]["rubrics_total"] if real else args.reports * args.rubrics
    load_before = load_average()
    if say and busy:
        say(busy)
    if say:  # before minutes of loading and scoring: what is measured, then each form as it runs
        say(columns.inputs({**shape, "decisions": decisions}) + f"; model {args.model} ({device}); forms: "
            f"{args.form}, then {args.baseline}; {args.repeats} timed run(s) each after a warm-up; load average "
            f"{load_before}")
    # the judge's own path (HFEngine / VLLMEngine through judge_batches) where the model is a real one
    judge_path = real[2] if real and args.model not in SHAPES else None
    hf = columns.HFSide(args, device, judge_path)
    groups = real[0] if real else make_groups(hf.model.config.vocab_size, args.reports, args.rubrics,
                                              args.prefix_tokens, args.suffix_tokens, args.seed)
    res = {"model": args.model, "device": device, "dtype": str(next(hf.model.parameters()).dtype).replace("torch.", ""),
           "threads": torch.get_num_threads(), **shape, "decisions": decisions, "repeats": args.repeats,
           "judge_path": judge_path is not None, "busy": busy, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}
    matmul = rates.machine_rates(hf.model, device, _rate_dtypes(device, res["dtype"]))
    res["matmul_gflops"], work_shape = matmul, rates.Shape.of(hf.model)
    if device == "cpu":
        res["cpu_bf16_native"] = rates.bf16_native()
    packed = hf.column(args.form, groups, say)
    res.update(columns.column_fields("packed", packed, decisions), **hf.kernel(args.form))
    res.update(rates.prefix_fields(hf.prefix_pass(args.form, groups)))
    if args.baseline != "none":
        naive = hf.column(args.baseline, groups, say)
        res.update(columns.column_fields("naive", naive, decisions), baseline_form=args.baseline)
        res.update(speedup=round(res["naive_s"] / res["packed_s"], 2),
                   token_ratio=round(res["naive_tokens"] / res["packed_tokens"], 2),
                   max_abs_diff=max(abs(a - b) for a, b in zip(packed.timing.p_true, naive.timing.p_true)))
    if device == "cuda":
        res.update(_gpu_peak(args.peak_tflops))
    if args.backend == "vllm":
        config = hf.model.config
        hf.close()  # the GPU (or the CPU's memory) goes to vLLM now
        _free_gpu()
        res.update(columns.vllm_column(args, config, groups, judge_path, packed, res["packed_s"], say))
    res.update(rates.column_rates(res, work_shape, groups, matmul))
    res["load_average_before"], res["load_average_after"] = load_before, load_average()
    return res


def _rate_dtypes(device: str, dtype: str) -> list[str]:
    """The dtypes whose matmul rate the bench measures: fp32 and bf16 on CPU, the model's dtype on a GPU."""
    return ["float32", "bfloat16"] if device == "cpu" else [dtype]


def check_args(args: JudgeBench) -> None:
    """Usage errors, before torch is imported and before minutes of scoring on the hf side."""
    import importlib.util

    from lifesearch_local.errors import LifesearchError

    if (args.tasks or args.limit) and not args.reports_from:
        raise LifesearchError("--tasks and --limit go with --reports-from FILE")
    if args.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise LifesearchError(columns.VLLM_MISSING + "No module named 'vllm'")


def _free_gpu() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _gpu_peak(peak: float | None) -> dict:
    """The GPU's name and its dense bf16 peak (given, else from PEAK_BF16_TFLOPS), for the fraction-of-peak figures."""
    import torch

    name = torch.cuda.get_device_name()
    peak = peak or next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
    return {"gpu": name, **({"peak_tflops": peak} if peak else {})}
