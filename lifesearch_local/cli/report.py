"""`lifesearch report RUN_DIR`: write the self-contained HTML report of a run directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from lifesearch_local.cli.common import add_task_ids, selected_task_ids


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write RUN_DIR/report.html",
        description="Write one self-contained HTML file (inline CSS and SVG charts, no network at view "
        "time) with the Table 4 scores per judge, score vs output tokens and per-domain charts, judge "
        "agreement and confusion matrices when labels exist, failure-mode counts, a per-task drill-down "
        "of every rubric decision, and the manifest, with 95% CIs, the agent comparison matrix and the "
        "list of disagreements with the labels. Works on any directory the commands write: tasks, reports "
        "and labels come from the options, else RUN_DIR/*.jsonl, else the paths its manifest records "
        "(`judge --out`, `sweep`, `reporteval`); judgments.jsonl, manifest.json, config.yaml and "
        "trajectories/ are used when present.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="run directory")
    p.add_argument("--labels", help="reference labels JSONL (default: RUN_DIR/labels.jsonl if present)")
    p.add_argument("--tasks", help="tasks JSONL (default: RUN_DIR/tasks.jsonl, else the manifest's)")
    p.add_argument("--reports", help="reports JSONL (default: RUN_DIR/reports.jsonl, else the manifest's)")
    p.add_argument("--out", help="output file (default: RUN_DIR/report.html)")
    p.add_argument("--allow-missing", action="store_true",
                   help="count rubrics without a judgment as not satisfied (the page says how many), as `score "
                   "--allow-missing` does; without it an incomplete run is refused")
    add_task_ids(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.output.report import write_report

    path = write_report(
        Path(args.run_dir),
        Path(args.labels) if args.labels else None,
        Path(args.out) if args.out else None,
        tasks_path=Path(args.tasks) if args.tasks else None,
        reports_path=Path(args.reports) if args.reports else None,
        allow_missing=args.allow_missing,
        task_ids=selected_task_ids(args),
    )
    print(path)
    return 0
