"""`lifesearch agree`: compare judge configs with reference labels (the paper's Table 3)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping


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
    return 0


def agreement_table(result: Mapping[str, Mapping], title: str = ""):
    """A rich Table in the Table 3 layout, one row per judge config, in the given order."""
    from rich.table import Table

    from ..agreement import TABLE3_COLUMNS as COLUMNS
    from ..agreement import fmt_metric as fmt

    t = Table(title=title or None)
    t.add_column("Judge", style="bold")
    t.add_column("Runs", justify="right")
    for _, short, _, _ in COLUMNS:
        t.add_column(short, justify="right")
    for name in ("ρ", "τ", "Agents", "n", "Ungr."):
        t.add_column(name, justify="right")
    for judge, m in result.items():
        t.add_row(
            judge,
            str(m["n_runs"]),
            *[fmt(m[key], how) for _, _, key, how in COLUMNS],
            fmt(m.get("rank_spearman"), "f3"),
            fmt(m.get("rank_kendall"), "f3"),
            str(m.get("rank_agents", "—")),
            str(m["n"]),
            str(m["ungraded"]),
        )
    return t


def breakdown_table(result: Mapping[str, Mapping], attr: str):
    """Mean accuracy (and n) per value of one rubric attribute, one row per judge."""
    from rich.table import Table

    from ..agreement import fmt_metric as fmt

    values = sorted({v for m in result.values() for v in m["by"][attr]})
    t = Table(title=f"Mean accuracy (%) by {attr}")
    t.add_column("Judge", style="bold")
    for v in values:
        t.add_column(v, justify="right")
    for judge, m in result.items():
        cells = []
        for v in values:
            g = m["by"][attr].get(v)
            cells.append("—" if g is None else f"{fmt(g['accuracy_mean'], 'pct1')} (n={g['n']})")
        t.add_row(judge, *cells)
    return t


def print_agreement(result: Mapping[str, Mapping], source: str, n_labels: int) -> None:
    from ..agreement import BREAKDOWNS, TABLE3_LEGEND
    from ..tables import console as wide_console

    console = wide_console()
    console.print(agreement_table(result, title=f"Judge agreement with {n_labels} labels ({source})"))
    console.print(TABLE3_LEGEND, style="dim")
    for attr in BREAKDOWNS:
        console.print(breakdown_table(result, attr))
    ungraded = sum(m["ungraded"] for m in result.values())
    if ungraded:
        console.print(f"{ungraded} ungraded judgment(s) counted as wrong")


def print_agreement_summary(tasks, judgments, labels_path) -> None:
    """The Table 3 layout for a pipeline that just judged (`lifesearch demo` / `run`); silent
    without a labels file, a warning (never an exception) when the labels do not match."""
    from pathlib import Path

    from ..agreement import TABLE3_LEGEND, agreement
    from ..errors import LifesearchError
    from ..jsonl import read_records
    from ..labels import label_index
    from ..records import Label
    from ..tables import console as wide_console

    if labels_path is None or not Path(labels_path).exists():
        return
    labels = read_records(labels_path, Label)
    try:
        result = agreement(tasks, judgments, label_index(labels), exclude={lab.source for lab in labels})
    except LifesearchError as e:
        print(f"judge agreement not computed: {e}", file=sys.stderr)
        return
    source = ", ".join(sorted({lab.source for lab in labels}))
    console = wide_console()
    console.print(agreement_table(result, title=f"Judge agreement with {len(labels)} labels ({source})"))
    console.print(TABLE3_LEGEND, style="dim")
