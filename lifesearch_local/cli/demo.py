"""`lifesearch demo`: judge the bundled sample reports offline, score them, write a run directory."""

from __future__ import annotations

import argparse
import shutil
import time

TINY_NOTE = (
    "NOTE: {model} is a tiny model with RANDOM weights, built locally so the demo runs offline on a CPU. "
    "Its verdicts are noise: the scores below only show the pipeline working (prompts -> packed kernel -> "
    "judgments -> eq. 1 -> tables). Pass --model with a real judge (a local path or hub name, e.g. "
    "Qwen/Qwen3-8B) to get meaningful scores."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="offline end-to-end demo on the bundled samples",
        description="Judge the bundled SAMPLE reports (two sample agents, data/sample/) against their "
        "rubrics with the packed judge kernel, score them as the paper does, compare with the sample "
        "labels, and write a run directory with report.html. Runs offline on a CPU; by default with a "
        "tiny random-weight model (the scores then only demonstrate the pipeline).",
    )
    p.add_argument("--model", default="tiny-qwen3", help="judge model: tiny-*, a local path or a hub name")
    p.add_argument("--out", default="runs/demo", help="run directory (reused to resume)")
    p.add_argument("--kernel", default="auto", choices=["auto", "dense", "flex", "two_stage", "naive", "single"])
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--fresh", action="store_true", help="delete the run directory first")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def prepare_run_dir(out: str, fresh: bool):
    """Copy the sample tasks, reports and labels into the run directory (the run's own inputs)."""
    from pathlib import Path

    from ..resources import resource_path
    from ..store import RunDir, sha256_file

    if fresh:
        shutil.rmtree(out, ignore_errors=True)
    rd = RunDir(out)
    for name in ("tasks.jsonl", "reports.jsonl", "labels.jsonl"):
        src = resource_path("data", "sample", name)
        dst = rd.file(name)
        if not dst.exists() or sha256_file(dst) != sha256_file(src):
            if dst.exists() and Path(rd.file("judgments.jsonl")).exists():
                rd.file("judgments.jsonl").unlink()  # inputs changed: old judgments no longer apply
            shutil.copyfile(src, dst)
    return rd


def run(args: argparse.Namespace) -> int:
    import yaml

    from serving.config import ModelConfig
    from serving.tiny import TINY_MODELS

    from ..config import JudgeConfig
    from ..jsonl import read_records
    from ..judging import judge_stage
    from ..records import Judgment, Report
    from ..report_html import write_report
    from ..scoring import score_by_judge
    from ..store import sha256_file
    from ..tables import print_scores
    from ..tasks import load_tasks
    from .agree import print_agreement_summary
    from .score import scores_json

    t0 = time.perf_counter()
    if args.model in TINY_MODELS:
        print(TINY_NOTE.format(model=args.model))
    rd = prepare_run_dir(args.out, args.fresh)
    cfg = JudgeConfig(id=f"{args.model.rstrip('/').split('/')[-1]}-choice",
                      model=ModelConfig(model=args.model, kernel=args.kernel, device=args.device))
    rd.file("config.yaml").write_text(yaml.safe_dump({"judge": cfg.model_dump(mode="json")}, sort_keys=False))
    tasks = load_tasks(rd.file("tasks.jsonl"))
    reports = read_records(rd.file("reports.jsonl"), Report)
    rd.update_manifest(hashes={n: sha256_file(rd.file(f"{n}.jsonl")) for n in ("tasks", "reports", "labels")}
                       | {"config": sha256_file(rd.file("config.yaml"))})
    stats = judge_stage(rd, tasks, reports, cfg, show=not args.quiet)
    judgments = [j for j in rd.load("judgments.jsonl", Judgment) if j.judge == cfg.id]
    by_judge = score_by_judge(tasks, judgments, reports=reports)
    import json

    rd.file("scores.json").write_text(json.dumps(scores_json(by_judge), indent=2, ensure_ascii=False) + "\n")
    print_scores(by_judge)
    print_agreement_summary(tasks, judgments, rd.file("labels.jsonl"))
    html = write_report(rd.path)
    print(
        f"{stats['decisions']} new decisions ({stats.get('kernel_form', cfg.mode)}, "
        f"{stats['decisions_per_s']} decisions/s); total {time.perf_counter() - t0:.1f} s\n"
        f"run directory: {rd.path}  (report: {html})"
    )
    return 0
