"""`lifesearch score`: the paper's eq. (1) over a judgments file, per judge and agent."""

from __future__ import annotations

import argparse
import json
import sys

from lifesearch_local.cli.common import manifest_beside, positive_int, print_caveats


def add_bootstrap_options(p: argparse.ArgumentParser) -> None:
    """--resamples and --seed of the bootstrap and permutation tests (recorded in the output)."""
    from lifesearch_local.analysis.resampling import DEFAULT_RESAMPLES, DEFAULT_SEED

    p.add_argument("--resamples", type=positive_int, default=DEFAULT_RESAMPLES, metavar="B",
                   help=f"bootstrap resamples and random sign flips (default {DEFAULT_RESAMPLES})")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED,
                   help=f"seed of the resampling; same input and seed, same output (default {DEFAULT_SEED})")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help="score judgments (Table 4 layout)",
        description="Score a judgments JSONL against its tasks: per task Σw·y/Σw over rubrics with "
        "w > 0, mean over tasks per run, mean ± sample std over runs, per-domain means, one row per "
        "agent, one table per judge config. Ungraded judgments count as not satisfied (and are "
        "counted); a rubric with no judgment is an error unless --allow-missing. Every score gets a 95% "
        "bootstrap CI over tasks (a task's runs resampled together) and every agent pair a paired CI "
        "and a sign-flip permutation p-value, Holm-adjusted (docs/statistics.md).",
    )
    p.add_argument("--tasks", required=True, help="tasks JSONL")
    p.add_argument("--judgments", required=True, help="judgments JSONL (from `lifesearch judge`)")
    p.add_argument("--reports", help="reports JSONL: adds iterations and output tokens per task")
    p.add_argument("--judge", help="score only this judge config id")
    p.add_argument("--allow-missing", action="store_true", help="count unjudged rubrics as not satisfied")
    p.add_argument("--limit", type=positive_int, metavar="N",
                   help="score only the first N tasks of the tasks file (what `lifesearch judge --limit N` judged)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON instead of tables (with ci95, comparisons)")
    out.add_argument("--csv", action="store_true",
                     help="print long-format CSV: one row per judge × agent × metric, then one per agent pair "
                     "(columns in docs/statistics.md)")
    p.add_argument("--compare", action="store_true",
                   help="print every agent pair: difference with its paired 95%% CI, sign-flip p, Holm p")
    add_bootstrap_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.analysis.scoring import (
        score_by_judge,
        scores_json,
        split_by_judge,
        uncertainty_by_judge,
    )
    from lifesearch_local.cli.tables import print_scores
    from lifesearch_local.output.csv_rows import SCORE_COLUMNS, score_rows, to_csv
    from lifesearch_local.records import Judgment, Report
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import first_tasks, load_tasks

    tasks = load_tasks(args.tasks)
    judgments = read_records(args.judgments, Judgment)
    manifest = manifest_beside(args.judgments)  # before any output: a damaged one stops the command
    reports = read_records(args.reports, Report) if args.reports else []
    if args.limit is not None and args.limit < len(tasks):
        tasks, judgments, reports = first_tasks(tasks, args.limit, judgments, reports)
        print(f"--limit {args.limit}: scoring the first {len(tasks)} tasks", file=sys.stderr)
    by_judge = score_by_judge(tasks, judgments, judge=args.judge, allow_missing=args.allow_missing, reports=reports)
    unc = uncertainty_by_judge(tasks, judgments, by_judge, n_resamples=args.resamples, seed=args.seed)
    if args.json:
        print(json.dumps(scores_json(by_judge, unc), indent=2, ensure_ascii=False))
    elif args.csv:
        sys.stdout.write(to_csv(SCORE_COLUMNS, score_rows(by_judge, unc)))
    else:
        print_scores(by_judge, unc, compare=args.compare)
    shown = [j for name, js in split_by_judge(judgments).items() if name in by_judge for j in js]
    print_caveats(args.json or args.csv, manifest=manifest, judgments=shown)
    return 0
