"""Judge one sample report's rubrics in choice mode and in generate mode (padded vs shared-prefix path): seconds per decision and peak RSS.

Each mode runs in its own subprocess (peak RSS is that process's ru_maxrss: model, prompts
and decoding together); the timed part is the judging call only, after the model is loaded
and one rubric was judged to warm it up.

    PYTHONPATH=$PWD python scripts/bench/bench_generate.py --model smollm2-135m --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

MODES = ("choice", "generate-padded", "generate-shared")


def one(args: argparse.Namespace) -> dict:
    """Judge the report in `args.one` mode in this process; figures as a dict."""
    import torch

    torch.set_num_threads(args.threads)
    from lifesearch_local.judge.config import JudgeConfig
    from lifesearch_local.judge.rubric import Pending, judge_choice, judge_generate, judged_rubrics
    from lifesearch_local.llm.models import engine_config
    from lifesearch_local.records import Report
    from lifesearch_local.resources import resource_path
    from lifesearch_local.tasks import load_tasks
    from serving import model_config
    from serving.engines.hf import HFEngine

    tasks = {t.id: t for t in load_tasks(resource_path("data", "sample", "tasks.jsonl"))}
    with open(resource_path("data", "sample", "reports.jsonl"), encoding="utf-8") as f:
        reports = [Report(**json.loads(line)) for line in f if line.strip()]
    report = next(r for r in reports if r.task_id == args.task and r.agent == args.agent)
    task = tasks[args.task]
    mode = "choice" if args.one == "choice" else "generate"
    form = "padded" if args.one == "generate-padded" else "shared_prefix"
    cfg = JudgeConfig(id="bench", mode=mode, max_tokens=args.max_tokens, retries=args.retries,
                      model=model_config(model=args.model, device="cpu", generate_form=form))
    backend = HFEngine(engine_config(cfg.model))
    pending = Pending(task, report, judged_rubrics(task)[: args.rubrics or None])
    judge = judge_choice if mode == "choice" else judge_generate
    judge(backend, cfg.model_copy(update={"max_tokens": 8}), [Pending(task, report, pending.rubrics[:1])], 0)  # warm-up
    backend.counters.update(generate_prompt_tokens=0, generate_output_tokens=0)
    t = time.perf_counter()
    rows = judge(backend, cfg, [pending], 0)[0]
    seconds = time.perf_counter() - t
    return {
        "mode": args.one, "decisions": len(rows), "seconds": round(seconds, 2),
        "s_per_decision": round(seconds / len(rows), 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "graded": sum(j.satisfied is not None for j in rows),
        "prompt_tokens": backend.stats()["generate_prompt_tokens"], "output_tokens": backend.stats()["generate_output_tokens"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--task", default="sample-en-01")
    p.add_argument("--agent", default="sample-thorough")
    p.add_argument("--rubrics", type=int, default=0, help="first N judged rubrics (0: all)")
    p.add_argument("--max-tokens", type=int, default=192)
    p.add_argument("--retries", type=int, default=0, help="judge retries after unparseable JSON (0: one attempt each)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one(args)))
        return 0
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    print(f"model {args.model}, report {args.task}/{args.agent}, max_tokens {args.max_tokens}, retries {args.retries}, "
          f"{args.threads} threads; load average before {os.getloadavg()}", flush=True)
    results = {}
    for mode in args.modes.split(","):
        cmd = [sys.executable, __file__, *(argv if argv is not None else sys.argv[1:]), "--one", mode]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        results[mode] = json.loads(out.strip().splitlines()[-1])
        print(json.dumps(results[mode]), flush=True)
    base = results.get("choice")
    for mode, r in results.items():
        if base and mode != "choice":
            print(f"{mode}: {r['s_per_decision'] / base['s_per_decision']:.1f}x choice mode per decision, "
                  f"peak RSS {r['peak_rss_mb']} MB")
    print(f"load average after {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
