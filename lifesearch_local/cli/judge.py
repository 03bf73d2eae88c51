"""`lifesearch judge`: grade reports against their rubrics with an open model (resumable)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import add_generate_options, judge_configs, positive_int, ray_config


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
    p.add_argument("--runs", type=int, help="judge repetitions (self-consistency)")
    add_generate_options(p, "generate mode: token cap of each answer (default 512; the JSON verdict needs well under 200)")
    p.add_argument("--kernel", choices=["auto", "dense", "flex", "two_stage", "shared", "naive", "single"],
                   help="hf backend: choice-scoring form (default auto)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="hf backend device")
    p.add_argument("--id", help="judge id recorded in judgments (default: the config's, else derived: "
                   "<model name>/<mode>/<hash of the settings>)")
    p.add_argument("--ray", action=argparse.BooleanOptionalAction, default=None,
                   help="run the judge as Ray actors (the config's `ray:` block, else a local cluster with "
                   "one replica); --no-ray runs in-process even when the config has a `ray:` block")
    p.add_argument("--limit", type=positive_int, metavar="N",
                   help="judge only the first N tasks of the tasks file (file order) and only their reports; "
                   "rerun with the same N to resume, or with a larger N to extend the run")
    p.add_argument("--force-config", action="store_true",
                   help="add to judgments that another config made under the same judge id (normally refused)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def limit_work(tasks: list, reports: list, limit: int | None) -> tuple[list, list]:
    """The first `limit` tasks (file order) and only their reports; printed when it cuts anything."""
    from ..tasks import first_tasks

    if limit is None:
        return tasks, reports
    if limit >= len(tasks):
        print(f"--limit {limit}: the tasks file has {len(tasks)} tasks, judging all of them")
        return tasks, reports
    kept, mine = first_tasks(tasks, limit, reports)
    print(f"--limit {limit}: judging {len(kept)} of {len(tasks)} tasks ({', '.join(t.id for t in kept[:5])}"
          f"{', …' if limit > 5 else ''}) and their {len(mine)} of {len(reports)} reports")
    return kept, mine


def legacy_id(args: argparse.Namespace, cfg) -> str | None:
    """The id `judge --model M` gave before ids were derived (`<dir name>-<mode>`), or None."""
    return None if args.config or args.id else f"{Path(args.model).name}-{cfg.mode}"


def run(args: argparse.Namespace) -> int:
    from serving.ray.session import ray_session

    from ..jsonl import read_records
    from ..judge.stage import judge_stage, keep_legacy_id
    from ..preflight import new_dir_or_nothing, preflight
    from ..records import Report
    from ..store import RunDir, sha256_file
    from ..tasks import load_tasks

    tasks, reports = limit_work(load_tasks(args.tasks), read_records(args.reports, Report), args.limit)
    ray, judges = ray_config(args), judge_configs(args)
    preflight([(f"judge {c.id}", c.model) for c in judges], ray)  # before the run directory exists
    with new_dir_or_nothing(args.out, keep=("judgments.jsonl",)):
        rd = RunDir(args.out)
        with rd.locked("judge"), ray_session(ray):
            rd.update_manifest(hashes={"tasks": sha256_file(args.tasks), "reports": sha256_file(args.reports)})
            for cfg in judges:
                cfg = keep_legacy_id(rd, cfg, legacy_id(args, cfg))
                stats = judge_stage(rd, tasks, reports, cfg, show=not args.quiet, ray=ray,
                                    force_config=args.force_config)
                if not report(cfg, stats, rd):
                    return 0
    return 0


def report(cfg, stats: dict, rd) -> bool:
    """Print one judge's summary line; False when a signal stopped the stage."""
    if stats["decisions"]:
        rate = f", {stats['decisions_per_s']} decisions/s"
    else:  # a stop before the first report was written is not a finished run
        rate = " (stopped before the first report)" if stats.get("stopped_early") else " (nothing left to judge)"
    form = f", kernel {stats['kernel_form']}" if "kernel_form" in stats else ""
    where = f", {stats['ray_replicas']} Ray replicas" if "ray_replicas" in stats else ""
    print(f"judge {cfg.id}: {stats['decisions']} decisions in {stats['wall_s']} s{rate}{form}{where} -> {rd.file('judgments.jsonl')}")
    if stats.get("stopped_early"):
        print("stopped by signal; rerun the same command to finish")
        return False
    return True
