"""`lifesearch panel`: several judges' judgments combined into one panel judge's verdicts."""

from __future__ import annotations

import argparse

from lifesearch_local.cli.common import id_arg


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "panel",
        help="combine several judges into one panel judge",
        description="Combine the decisions of several judges in a judgments file into the verdicts of one "
        "panel judge, written to --out as judgments under --id: usable wherever a judge's judgments are "
        "(score, agree, report, …). majority: the verdict most members gave, an even split decided by "
        "the members' mean p_true (≥ 0.5); mean: the mean p_true ≥ 0.5 (a member without p_true counts "
        "its verdict as 1 or 0). The panel's p_true: the share of members that said satisfied (majority; "
        "better calibrated than their mean p_true) or the mean the rule thresholds (mean). Each record names "
        "the members, their votes and the rule. Every member must have decided the same rubrics. With "
        "--labels: Cohen's κ between every two members' errors, and a warning when they fail together.",
    )
    p.add_argument("--judgments", required=True, help="judgments JSONL holding every member's judgments")
    p.add_argument("--members", required=True, metavar="A,B,C",
                   help="the member judges, comma-separated: judge ids (their first pass) or names id#k")
    p.add_argument("--combine", choices=("majority", "mean"), default="majority", help="the rule (default majority)")
    p.add_argument("--id", required=True, metavar="NAME", type=id_arg, help="the panel judge's id in the written judgments")
    p.add_argument("--out", required=True, metavar="FILE", help="where to write the panel's judgments (JSONL)")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.add_argument("--labels", metavar="H", help="reference labels (Label records): check whether members' errors are "
                   "correlated (κ of their right/wrong on the labelled decisions)")
    p.add_argument("--label-source", metavar="S", help="with --labels: keep only labels with this source")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from lifesearch_local.analysis.panel import panel_judgments
    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.records import Judgment
    from lifesearch_local.rundir.files import write_output
    from lifesearch_local.rundir.jsonl import dumps, read_records

    out = Path(args.out)
    if out.resolve() == Path(args.judgments).resolve():
        raise LifesearchError(f"{out}: --out is the --judgments file; write the panel to a file of its own")
    if out.exists() and not args.force:
        raise LifesearchError(f"{out}: exists; choose another --out, or pass --force to replace it")
    if out.is_dir():
        raise LifesearchError(f"{out}: is a directory; name a file")
    members = [m.strip() for m in args.members.split(",") if m.strip()]
    judgments = read_records(args.judgments, Judgment)
    panel = panel_judgments(judgments, members, args.combine, args.id)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LifesearchError(f"{out.parent}: cannot be made ({e.strerror or e}); choose another --out") from None
    write_output(out, "".join(dumps(j) + "\n" for j in panel))  # the one writer: a read-only folder in one line
    ties = sum(1 for j in panel if j.panel and j.panel.tie)
    ungraded = sum(1 for j in panel if j.satisfied is None)
    print(f"panel {args.id} ({args.combine} of {', '.join(members)}): {len(panel)} decisions -> {out}"
          + (f"; {ties} even split(s) decided by the mean p_true" if ties else "")
          + (f"; {ungraded} ungraded" if ungraded else ""))
    if args.labels:
        print_error_agreement(args, members, judgments)
    return 0


def print_error_agreement(args: argparse.Namespace, members: list[str], judgments: list) -> None:
    """κ of every two members' errors on the labelled decisions, and a warning for correlated ones."""
    from lifesearch_local.analysis.labels import label_index
    from lifesearch_local.analysis.panel import CORRELATED_KAPPA, error_agreement, member_judgments
    from lifesearch_local.records import Label
    from lifesearch_local.rundir.jsonl import read_records

    labels = label_index(read_records(args.labels, Label), args.label_source)
    rows = error_agreement([member_judgments(judgments, m) for m in members], members, labels)
    for r in rows:
        kap = "undefined" if r["kappa"] is None else f"{r['kappa']:+.2f}"
        print(f"errors of {r['a']} and {r['b']}: κ {kap} over {r['n']} labelled decisions ({r['both_wrong']} wrong together)")
    bad = [f"{r['a']} and {r['b']}" for r in rows if r["correlated"]]
    if bad:
        print(f"WARNING: correlated errors (κ > {CORRELATED_KAPPA}): {'; '.join(bad)} fail on the same decisions; the "
              "panel gains less than independent members would, and its p_true is over-confident where they agree")
