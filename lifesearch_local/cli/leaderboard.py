"""`lifesearch leaderboard SOURCE…`: rank agents from any source of task scores, with intervals and paired tests."""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from lifesearch_local.cli.common import add_task_ids
    from lifesearch_local.cli.score import add_bootstrap_options

    p = sub.add_parser(
        "leaderboard",
        help="rank agents from run directories, judgments or published score tables, with 95%% CIs",
        description="Rank agents from one or more sources of task scores: a run or `judge --out` directory, a "
        "judgments JSONL (with --tasks), a DeepResearch Bench II wide CSV (idx, language, theme, <system>…, "
        "avg; an empty cell = not scored) or a long CSV/JSONL (agent, task_id, score[, dimension, domain, "
        "judge]). In points (0–100): each agent's mean with its 95% task-bootstrap CI and task count; every "
        "pair's paired difference on the tasks both were scored on (CI, sign-flip p, Holm p); groups of "
        "agents that cannot be told apart; per-dimension and per-domain tables where the sources have "
        "them. Sources judged by different judges or scored on different tasks are ranked separately "
        "unless --allow-mixed (docs/leaderboards.md).",
    )
    p.add_argument("sources", nargs="+", metavar="SOURCE", help="run directory, judgments JSONL, wide or long table")
    p.add_argument("--tasks", help="tasks JSONL: needed for a judgments file; for a run directory, instead of its own")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON (agents.<name>.{mean, ci95, n_tasks}, comparisons)")
    out.add_argument("--csv", action="store_true", help="print long-format CSV, one row per agent (× domain) and pair")
    p.add_argument("--html", metavar="FILE", help="also write the leaderboard as a self-contained HTML page")
    add_task_ids(p)
    p.add_argument("--dimension", metavar="NAME",
                   help="the dimension to rank by (default total, else the first); the others are shown beside it")
    p.add_argument("--allow-mixed", action="store_true",
                   help="rank sources by different judges, or on different tasks, together (pairs on shared tasks)")
    p.add_argument("--allow-missing", action="store_true",
                   help="run directories and judgments: count unjudged rubrics as not satisfied (as `score` does)")
    add_bootstrap_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.analysis.leaderboard import leaderboard, leaderboard_json, select_tasks
    from lifesearch_local.cli.common import selected_task_ids
    from lifesearch_local.output.csv_rows import to_csv
    from lifesearch_local.output.leaderboard import LEADERBOARD_COLUMNS, leaderboard_rows, renderables
    from lifesearch_local.output.terminal import console
    from lifesearch_local.run.task_scores import read_source

    ids = selected_task_ids(args)
    tables = [t for s in args.sources for t in read_source(s, tasks_path=args.tasks, allow_missing=args.allow_missing,
                                                           task_ids=ids)]
    if ids is not None:
        tables = select_tasks(tables, ids)
    lb = leaderboard(tables, dimension=args.dimension, allow_mixed=args.allow_mixed, n_resamples=args.resamples,
                     seed=args.seed)
    for note in lb.notes:
        print(f"note: {note}", file=sys.stderr if args.json or args.csv else sys.stdout)
    if args.json:
        print(json.dumps(leaderboard_json(lb), indent=2, ensure_ascii=False))
    elif args.csv:
        sys.stdout.write(to_csv(LEADERBOARD_COLUMNS, leaderboard_rows(lb)))
    else:
        out = console()
        for item in renderables(lb):
            out.print(item, highlight=False)
    if args.html:
        from lifesearch_local.output.report.leaderboard import render_leaderboard
        from lifesearch_local.rundir.jsonl import write_atomic

        write_atomic(args.html, render_leaderboard(lb, f"Leaderboard — {', '.join(args.sources)}").encode("utf-8"))
        print(f"wrote {args.html}", file=sys.stderr)
    return 0
