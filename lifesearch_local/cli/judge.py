"""`lifesearch judge`: grade reports against their rubrics with an open model (resumable)."""

from __future__ import annotations

import argparse
import sys

from lifesearch_local.cli.common import (
    add_calibration,
    add_device,
    add_force_config,
    add_generate_options,
    add_kernel,
    add_quiet,
    add_task_ids,
    calibration,
    id_arg,
    judge_settings,
    no_limit_with_ids,
    positive_int,
    print_caveats,
    run_judgments,
    runs_int,
    selected_task_ids,
)
from lifesearch_local.rundir.directory import JUDGMENTS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "judge",
        help="judge reports rubric by rubric",
        description="Judge every rubric of every report with the paper's judge prompt (EN/ZH by task "
        "language). Writes DIR/judgments.jsonl; rerunning the same command judges only what is "
        "missing. choice mode reads p(true) vs p(false) in one packed forward pass per report; "
        "generate mode asks for the JSON verdict with a reason.",
    )
    p.add_argument("--tasks", required=True, help="tasks JSONL")
    p.add_argument("--reports", required=True, help="reports JSONL")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="YAML with a judge config (`judge:` or `judges:` block, or a bare one)")
    src.add_argument("--model", help="model: tiny-llama|tiny-qwen2|tiny-qwen3|tiny-mistral (random), smollm2-135m (real, needs the `real` extra), a local path or hub id")
    p.add_argument("--out", required=True, help="run directory (created; reused to resume)")
    p.add_argument("--mode", choices=["choice", "generate"], help="override the judge mode")
    p.add_argument("--runs", type=runs_int, help="judge repetitions (self-consistency)")
    add_generate_options(p, "generate mode: token cap of each answer (default 512; the JSON verdict needs well under 200)")
    add_kernel(p)
    add_device(p)
    p.add_argument("--id", type=id_arg, help="judge id recorded in judgments (default: the config's, else derived: "
                   "<model name>/<mode>/<hash of the settings>)")
    p.add_argument("--ray", action=argparse.BooleanOptionalAction, default=None,
                   help="run the judge as Ray actors (the config's `ray:` block, else a local cluster with "
                   "one replica); --no-ray runs in-process even when the config has a `ray:` block")
    p.add_argument("--limit", type=positive_int, metavar="N",
                   help="judge only the first N tasks of the tasks file (file order) and only their reports; "
                   "rerun with the same N to resume, or with a larger N to extend the run")
    add_task_ids(p)
    add_force_config(p, "the judgments of its judge id")
    add_quiet(p)
    p.add_argument("--dry-run", action="store_true",
                   help="print the estimate of this command (decisions per judge and repetition, tokens, memory, "
                   "time: see `lifesearch estimate`) and judge nothing; OUT is read, not created")
    add_calibration(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.cli.estimate import show
    from lifesearch_local.run.standalone import judge_run

    inv = invocation(args)
    estimated = judge_run(inv, after=report, say=print)
    if estimated is not None:  # --dry-run
        est, n_reports = estimated
        show(est, f"`judge` of {n_reports} reports into {inv.out}")
    return 0


def invocation(args: argparse.Namespace):
    """The arguments as the library takes them, read once: files, judge configs, Ray settings, cuts, dry run."""
    from lifesearch_local.run.standalone import JudgeInvocation

    ids = selected_task_ids(args)
    if ids is not None:
        no_limit_with_ids(args)
    dry_run = calibration(args) if args.dry_run else None
    judges, ray = judge_settings(args)
    return JudgeInvocation(out=args.out, tasks=args.tasks, reports=args.reports, judges=judges, ray=ray,
                           limit=args.limit, task_ids=ids, force_config=args.force_config, show=not args.quiet,
                           dry_run=dry_run)


def report(cfg, stats: dict, rd) -> bool:
    """Print one judge's summary line; False when a signal stopped the stage."""
    if stats["decisions"]:
        rate = f", {stats['decisions_per_s']} decisions/s"
        if "engine_start_s" in stats:
            rate += f" ({stats['engine_start_s']} s engine start-up, then {stats['steady_decisions_per_s']} decisions/s)"
    else:  # a stop before the first report was written is not a finished run
        rate = " (stopped before the first report)" if stats.get("stopped_early") else " (nothing left to judge)"
    form = f", kernel {stats['kernel_form']}" if "kernel_form" in stats else ""
    where = f", {stats['ray_replicas']} Ray replicas" if "ray_replicas" in stats else ""
    print(f"judge {cfg.id}: {stats['decisions']} decisions in {stats['wall_s']} s{rate}{form}{where} -> {rd.file(JUDGMENTS)}")
    if stats.get("machine_busy") and stats["decisions"]:
        print(stats["machine_busy"], file=sys.stderr)  # a notice about the timing, beside the summary, not part of it
    if stats.get("stopped_early"):
        print("stopped by signal; rerun the same command to finish")
        return False
    print_caveats(judges=[cfg], judgments=run_judgments(rd.path, [cfg]))
    return True
