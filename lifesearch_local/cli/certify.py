"""`lifesearch certify`: can judge X replace the reference judge? One study with its evidence and a verdict."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lifesearch_local.cli.common import manifest_beside, print_caveats, reference, result_default
from lifesearch_local.cli.score import add_bootstrap_options


def _margin(value: str) -> float:
    m = float(value)
    if not 0 <= m <= 100:
        raise argparse.ArgumentTypeError(f"a margin in points, 0 to 100, got {value}")
    return m


def register(sub: argparse._SubParsersAction) -> None:
    from lifesearch_local.analysis.certify import CATEGORY_FIELDS
    from lifesearch_local.run.config import CertifySettings

    p = sub.add_parser(
        "certify",
        help="can judge X replace the reference judge? (agreement, score shifts, Bias Index, ranking "
        "flips, non-inferiority against human labels)",
        description="Judge X against the verdicts of the judge it would replace (REF, labels format: e.g. "
        "Gemini's DRB II verdicts from `import drb2 --results`, or another judge's judgments with "
        "--labels-from-judgments): X's accuracy and κ against REF (cluster bootstrap over reports); each "
        "agent's score shift under X (eq. 1 on the same decisions, points) and the Bias Index (max − min "
        "shift, bootstrapped as one statistic); Kendall's τ of the agents' rankings and every pair whose "
        "order flips, with whether REF's own difference holds; the same per rubric category. With human "
        "labels (--human): non-inferiority of X's accuracy relative to REF's at --margin points (paired "
        "cluster bootstrap), and each agent's prediction-powered score (PPI++: X on every task corrected "
        "with the human-labelled tasks, which must be a random subset). Ends with a one-line verdict. "
        "Definitions: docs/statistics.md; the study, worked: docs/compare-judges.md.",
    )
    p.add_argument("--tasks", required=True, help="tasks JSONL (the rubrics and their categories)")
    p.add_argument("--judgments", required=True, help="judgments JSONL holding judge X's judgments")
    p.add_argument("--judge", metavar="X", help="the candidate judge id (or name#run); needed when the file holds several")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--labels", metavar="REF", help="the reference judge's verdicts (Label records)")
    src.add_argument("--labels-from-judgments", metavar="FILE",
                     help="take the reference verdicts from a judge's judgments (with --label-judge)")
    p.add_argument("--label-judge", metavar="ID", help="the reference judge id (or name#run) in --labels-from-judgments")
    p.add_argument("--label-source", metavar="S", help="keep only reference labels with this source")
    p.add_argument("--human", metavar="H", help="human labels (Label records) on a subset of the decisions")
    p.add_argument("--human-source", metavar="S", help="keep only human labels with this source")
    margin = result_default(CertifySettings, "margin")
    p.add_argument("--margin", type=_margin, default=margin, metavar="M",
                   help=f"non-inferiority / equivalence margin in points (default {margin:g})")
    p.add_argument("--category-field", default=result_default(CertifySettings, "category_field"), choices=CATEGORY_FIELDS,
                   help="rubric category for the per-category view (default: the rubric's type; `dimension` "
                   "for DeepResearch Bench II's)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the study as JSON")
    out.add_argument("--csv", action="store_true", help="print the study as long-format CSV (docs/statistics.md)")
    p.add_argument("--out", metavar="FILE",
                   help="also write the JSON study to FILE (as RUN_DIR/certify.json, `lifesearch report RUN_DIR` shows it)")
    add_bootstrap_options(p)
    p.set_defaults(func=run)


def study(args: argparse.Namespace) -> tuple[dict, list]:
    """The study of the files and settings `args` names (run.certify_study), and X's judgments."""
    from lifesearch_local.run.certify_study import StudyFiles, certify_study
    from lifesearch_local.run.config import CertifySettings

    files = StudyFiles(tasks=args.tasks, judgments=args.judgments, judge=args.judge, labels=args.labels,
                       labels_from_judgments=args.labels_from_judgments, label_judge=args.label_judge,
                       human=args.human, human_source=args.human_source)
    settings = CertifySettings(margin=args.margin, category_field=args.category_field)
    return certify_study(files, reference(args), settings, n_resamples=args.resamples, seed=args.seed)


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.output.csv_rows import to_csv
    from lifesearch_local.output.study import CERTIFY_COLUMNS, certify_rows

    result, mine = study(args)
    text = json.dumps(result, indent=2, ensure_ascii=False)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    if args.json:
        print(text)
    elif args.csv:
        sys.stdout.write(to_csv(CERTIFY_COLUMNS, certify_rows(result)))
    else:
        print_study(result)
    print_caveats(args.json or args.csv, manifest=manifest_beside(args.judgments), judgments=mine)
    return 0


def print_study(result: dict) -> None:
    from lifesearch_local.output.study import certify_renderables
    from lifesearch_local.output.terminal import console

    out = console()
    for r in certify_renderables(result):
        out.print(r, highlight=False)
