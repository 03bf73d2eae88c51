"""`lifesearch agree`: compare judge configs with reference labels (the paper's Table 3)."""

from __future__ import annotations

import argparse
import json
import sys

from lifesearch_local.cli.common import (
    add_task_ids,
    manifest_beside,
    positive_int,
    print_caveats,
    reference,
    selected_task_ids,
)
from lifesearch_local.cli.score import add_bootstrap_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "agree",
        help="judge agreement with reference labels (Table 3 layout)",
        description="For each judge config in the judgments: mean accuracy over its runs, "
        "self-consistency, majority-vote accuracy, Cohen's kappa, and with p_true: ROC AUC, ECE, "
        "accuracy at the best threshold; broken down by language, domain, type, necessity and "
        "priority; and the Spearman/Kendall correlation of the agents' ranking under the judge and "
        "under the labels. Ungraded judgments count as wrong. See lifesearch_local/analysis/agreement.py "
        "for the exact definitions (ties, pooling, bins). Each metric gets a 95% cluster-bootstrap CI over "
        "reports, and each pair of judges a paired CI of the difference and McNemar's exact test "
        "(docs/statistics.md).",
    )
    p.add_argument("--tasks", required=True, help="tasks JSONL (rubric attributes for the breakdowns)")
    p.add_argument("--judgments", required=True, help="judgments JSONL of the judge configs to compare")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--labels", help="reference labels JSONL (Label records)")
    src.add_argument(
        "--labels-from-judgments",
        metavar="FILE",
        help="use another judge's judgments as the reference (with --label-judge)",
    )
    p.add_argument("--label-judge", metavar="ID", help="the judge id (or name#run) in --labels-from-judgments")
    p.add_argument("--label-source", metavar="S", help="keep only labels with this source")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON instead of tables (with ci95, judge_vs_judge)")
    out.add_argument("--csv", action="store_true", help="print long-format CSV, one row per judge × group × metric "
                     "(columns in docs/statistics.md)")
    p.add_argument("--disagreements", action="store_true",
                   help="list every labelled decision where a judge and the labels differ, most confident "
                   "mistakes first (with --json / --csv: as JSON / CSV)")
    p.add_argument("--limit", type=positive_int, metavar="N", help="with --disagreements: show the first N")
    add_task_ids(p)
    add_bootstrap_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.analysis.agreement import agreement
    from lifesearch_local.analysis.agreement_ci import agreement_uncertainty
    from lifesearch_local.cli.tables import print_agreement
    from lifesearch_local.output.csv_rows import AGREE_COLUMNS, agreement_rows, to_csv
    from lifesearch_local.records import Judgment
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import check_known_tasks, chosen_tasks, load_tasks

    tasks = load_tasks(args.tasks)
    ref = reference(args)
    labels, source = ref.index, ref.source
    judgments = read_records(args.judgments, Judgment)
    manifest = manifest_beside(args.judgments)  # before any output: a damaged one stops the command
    check_known_tasks(tasks, (j.task_id for j in judgments), args.tasks)
    check_known_tasks(tasks, (k[0] for k in labels), args.tasks, "label")
    ids = selected_task_ids(args)
    if ids is not None:
        tasks, judgments = chosen_tasks(tasks, ids, args.tasks, judgments)
        labels = {k: v for k, v in labels.items() if k[0] in ids}
        print(f"--task-ids: {len(tasks)} task(s), {len(labels)} of their labels", file=sys.stderr)
    exclude = [args.label_judge.split("#")[0]] if args.label_judge else []
    if args.disagreements:
        return print_disagreements(args, tasks, judgments, labels, exclude, manifest)
    result = agreement(tasks, judgments, labels, exclude=exclude)
    unc = agreement_uncertainty(tasks, judgments, labels, result, n_resamples=args.resamples, seed=args.seed)
    if args.json:
        print(json.dumps({"label_source": source, "n_labels": len(labels), "judges": result, **unc}, indent=2))
    elif args.csv:
        sys.stdout.write(to_csv(AGREE_COLUMNS, agreement_rows(result, unc["judge_vs_judge"], unc["bootstrap"])))
    else:
        print_agreement(result, source, len(labels), unc)
    shown = [j for j in judgments if j.judge not in exclude]
    print_caveats(args.json or args.csv, manifest=manifest, judgments=shown)
    return 0


def print_disagreements(args: argparse.Namespace, tasks: list, judgments: list, labels: dict, exclude: list,
                        manifest: dict | None) -> int:
    """`--disagreements`: the list as a table, JSON or CSV."""
    from lifesearch_local.analysis.disagreements import disagreements
    from lifesearch_local.output.csv_rows import DISAGREEMENT_COLUMNS, to_csv
    from lifesearch_local.output.terminal import console, disagreement_table

    rows = disagreements(tasks, judgments, labels, exclude=exclude)
    total = len(rows)
    rows = rows[: args.limit] if args.limit else rows
    if args.json:
        print(json.dumps({"n_labels": len(labels), "n_disagreements": total, "disagreements": rows}, indent=2,
                         ensure_ascii=False))
    elif args.csv:
        sys.stdout.write(to_csv(DISAGREEMENT_COLUMNS, rows))
    else:
        shown = f" (first {len(rows)})" if len(rows) < total else ""
        console().print(disagreement_table(rows, title=f"{total} labelled decision(s) where a judge and the labels "
                                           f"differ{shown}, most confident mistakes first"))
    judged = [j for j in judgments if j.judge not in exclude]
    print_caveats(args.json or args.csv, manifest=manifest, judgments=judged)
    return 0
