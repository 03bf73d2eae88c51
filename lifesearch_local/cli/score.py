"""`lifesearch score`: the paper's eq. (1) over a judgments file, per judge and agent."""

from __future__ import annotations

import argparse
import json
import sys

from .common import manifest_beside, positive_int, print_caveats


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help="score judgments (Table 4 layout)",
        description="Score a judgments JSONL against its tasks: per task Σw·y/Σw over rubrics with "
        "w > 0, mean over tasks per run, mean ± sample std over runs, per-domain means, one row per "
        "agent, one table per judge config. Ungraded judgments count as not satisfied (and are "
        "counted); a rubric with no judgment is an error unless --allow-missing.",
    )
    p.add_argument("--tasks", required=True, help="tasks JSONL")
    p.add_argument("--judgments", required=True, help="judgments JSONL (from `lifesearch judge`)")
    p.add_argument("--reports", help="reports JSONL: adds iterations and output tokens per task")
    p.add_argument("--judge", help="score only this judge config id")
    p.add_argument("--allow-missing", action="store_true", help="count unjudged rubrics as not satisfied")
    p.add_argument("--limit", type=positive_int, metavar="N",
                   help="score only the first N tasks of the tasks file (what `lifesearch judge --limit N` judged)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..jsonl import read_records
    from ..records import Judgment, Report
    from ..scoring import score_by_judge, scores_json, split_by_judge
    from ..tables import print_scores
    from ..tasks import first_tasks, load_tasks

    tasks = load_tasks(args.tasks)
    judgments = read_records(args.judgments, Judgment)
    reports = read_records(args.reports, Report) if args.reports else []
    if args.limit is not None and args.limit < len(tasks):
        tasks, judgments, reports = first_tasks(tasks, args.limit, judgments, reports)
        print(f"--limit {args.limit}: scoring the first {len(tasks)} tasks", file=sys.stderr)
    by_judge = score_by_judge(tasks, judgments, judge=args.judge, allow_missing=args.allow_missing, reports=reports)
    if args.json:
        print(json.dumps(scores_json(by_judge), indent=2, ensure_ascii=False))
    else:
        print_scores(by_judge)
    shown = [j for name, js in split_by_judge(judgments).items() if name in by_judge for j in js]
    print_caveats(args.json, manifest=manifest_beside(args.judgments), judgments=shown)
    return 0
