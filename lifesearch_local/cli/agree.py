"""`lifesearch agree`: compare judge configs with reference labels (the paper's Table 3)."""

from __future__ import annotations

import argparse
import json
import sys

from .common import manifest_beside, print_caveats


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "agree",
        help="judge agreement with reference labels (Table 3 layout)",
        description="For each judge config in the judgments: mean accuracy over its runs, "
        "self-consistency, majority-vote accuracy, Cohen's kappa, and with p_true: ROC AUC, ECE, "
        "accuracy at the best threshold; broken down by language, domain, type, necessity and "
        "priority; and the Spearman/Kendall correlation of the agents' ranking under the judge and "
        "under the labels. Ungraded judgments count as wrong. See lifesearch_local/agreement.py "
        "for the exact definitions (ties, pooling, bins).",
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
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=run)


def load_labels(args: argparse.Namespace) -> tuple[dict, str]:
    """The reference labels by key, and a description of where they came from."""
    from ..errors import LifesearchError
    from ..jsonl import read_records
    from ..labels import label_index, labels_from_judgments
    from ..records import Judgment, Label

    if args.labels:
        labels = read_records(args.labels, Label)
        index = label_index(labels, args.label_source)
        return index, args.label_source or ", ".join(sorted({lab.source for lab in labels}))
    if not args.label_judge:
        raise LifesearchError("--labels-from-judgments needs --label-judge ID (the judge to use as reference)")
    labels, skipped = labels_from_judgments(read_records(args.labels_from_judgments, Judgment), args.label_judge)
    if skipped:
        print(f"reference judge {args.label_judge}: {skipped} ungraded judgment(s) skipped", file=sys.stderr)
    return label_index(labels), args.label_judge


def run(args: argparse.Namespace) -> int:
    from ..agreement import agreement
    from ..jsonl import read_records
    from ..records import Judgment
    from ..tables import print_agreement
    from ..tasks import load_tasks

    tasks = load_tasks(args.tasks)
    labels, source = load_labels(args)
    judgments = read_records(args.judgments, Judgment)
    exclude = [args.label_judge.split("#")[0]] if args.label_judge else []
    result = agreement(tasks, judgments, labels, exclude=exclude)
    if args.json:
        print(json.dumps({"label_source": source, "n_labels": len(labels), "judges": result}, indent=2))
    else:
        print_agreement(result, source, len(labels))
    shown = [j for j in judgments if j.judge not in exclude]
    print_caveats(args.json, manifest=manifest_beside(args.judgments), judgments=shown)
    return 0
