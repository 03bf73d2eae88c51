"""`lifesearch plan-labels`: how many human labels a decision needs, before any label exists."""

from __future__ import annotations

import argparse
import json


def _share(value: str) -> float:
    x = float(value)
    if not 0 <= x <= 1:
        raise argparse.ArgumentTypeError(f"a share from 0 to 1, got {value}")
    return x


def _positive(value: str) -> float:
    x = float(value)
    if not x > 0:
        raise argparse.ArgumentTypeError(f"a positive number, got {value}")
    return x


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan-labels",
        help="how many human labels a certify margin or a PPI interval needs (before labelling)",
        description="The label budget, from assumptions you state. Non-inferiority (certify --human): the "
        "accuracy of the candidate and of the reference against people, their discordance (share of decisions "
        "where exactly one is right; default: as if their errors were independent), the rubrics per report and "
        "the intra-report correlation of the judges' right/wrong difference → labelled decisions and reports "
        "for a one-sided test at --alpha to show non-inferiority at --margin with --power (normal "
        "approximation; checked by simulation). certify reports the same from its own pilot "
        "(non_inferiority.reports_needed). PPI (score --ppi): the sd of a task's human score and the "
        "judge–truth correlation of task scores → labelled tasks for a 95% interval of --half-width. "
        "Definitions: docs/statistics.md.",
    )
    p.add_argument("--judge-accuracy", type=_share, metavar="P", help="the candidate's accuracy against people (0-1)")
    p.add_argument("--reference-accuracy", type=_share, metavar="P", help="the reference's accuracy against people (0-1)")
    p.add_argument("--discordance", type=_share, metavar="D",
                   help="share of decisions where exactly one judge is right (default: independent errors)")
    p.add_argument("--rubrics-per-report", type=_positive, default=10.0, metavar="M",
                   help="labelled rubrics per report (default 10)")
    p.add_argument("--icc", type=_share, default=0.05, metavar="RHO",
                   help="intra-report correlation of the right/wrong difference (default 0.05)")
    p.add_argument("--margin", type=_positive, default=2.0, metavar="M", help="margin in points (default 2)")
    p.add_argument("--alpha", type=_share, default=0.025, metavar="A", help="one-sided level (default 0.025)")
    p.add_argument("--power", type=_share, default=0.8, metavar="P", help="power (default 0.8)")
    p.add_argument("--sigma", type=_positive, metavar="S", help="PPI: sd of a task's human score (0-1 scale)")
    p.add_argument("--rho", type=_share, metavar="R", help="PPI: correlation of the judge's and the humans' task scores")
    p.add_argument("--half-width", type=_positive, metavar="H", help="PPI: the interval's half-width (0-1 scale)")
    p.add_argument("--unlabelled-tasks", type=int, metavar="N", help="PPI: tasks the judge scores without labels")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.analysis.label_budget import plan_non_inferiority, plan_ppi
    from lifesearch_local.errors import LifesearchError

    out: dict = {}
    if args.judge_accuracy is not None or args.reference_accuracy is not None:
        if args.judge_accuracy is None or args.reference_accuracy is None:
            raise LifesearchError("--judge-accuracy and --reference-accuracy go together")
        try:
            out["non_inferiority"] = plan_non_inferiority(
                args.judge_accuracy, args.reference_accuracy, margin=args.margin, discordance=args.discordance,
                rubrics_per_report=args.rubrics_per_report, icc=args.icc, alpha=args.alpha, power=args.power)
        except ValueError as e:
            raise LifesearchError(str(e)) from None
    if any(v is not None for v in (args.sigma, args.rho, args.half_width)):
        if args.sigma is None or args.rho is None or args.half_width is None:
            raise LifesearchError("--sigma, --rho and --half-width go together")
        out["ppi"] = plan_ppi(args.sigma, args.rho, args.half_width, n_unlabelled=args.unlabelled_tasks)
    if not out:
        raise LifesearchError("nothing to plan: give --judge-accuracy and --reference-accuracy (certify), or --sigma, "
                              "--rho and --half-width (PPI)")
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for line in plan_lines(out):
        print(line)
    return 0


def plan_lines(out: dict) -> list[str]:
    lines = []
    ni = out.get("non_inferiority")
    if ni:
        head = (f"non-inferiority at a {ni['margin']:g}-point margin, one-sided test at {ni['alpha_one_sided']:g}, "
                f"power {ni['power']:.0%}, true difference {ni['assumed_diff']:+.1f} points, discordance "
                f"{ni['discordance']:.3f}, design effect {ni['design_effect']:.2f}")
        lines.append(head + (f": {ni['decisions_needed']} labelled decisions = {ni['reports_needed']} reports of "
                             f"{ni['rubrics_per_report']:g} rubrics" if ni["reports_needed"] else f": {ni['reason']}"))
    pp = out.get("ppi")
    if pp:
        lines.append(f"PPI++ 95% interval of half-width {pp['half_width']:g} (task-score sd {pp['sigma']:g}, judge–truth "
                     f"correlation {pp['rho']:g}): " + (f"{pp['labelled_tasks_needed']} labelled tasks"
                                                         if pp["labelled_tasks_needed"] else pp["reason"])
                     + f" (labels alone: {pp['labels_only_tasks']})")
    return lines
