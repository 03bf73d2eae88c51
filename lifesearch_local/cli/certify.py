"""`lifesearch certify`: can judge X replace the reference judge? One study with its evidence and a verdict."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lifesearch_local.cli.common import add_wide, manifest_beside, print_caveats
from lifesearch_local.cli.score import add_bootstrap_options


def _margin(value: str) -> float:
    m = float(value)
    if not 0 <= m <= 100:
        raise argparse.ArgumentTypeError(f"a margin in points, 0 to 100, got {value}")
    return m


def register(sub: argparse._SubParsersAction) -> None:
    from lifesearch_local.analysis.certify import CATEGORY_FIELDS

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
    p.add_argument("--margin", type=_margin, default=2.0, metavar="M",
                   help="non-inferiority / equivalence margin in points (default 2)")
    p.add_argument("--category-field", default="type", choices=CATEGORY_FIELDS,
                   help="rubric category for the per-category view (default: the rubric's type; `dimension` "
                   "for DeepResearch Bench II's)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the study as JSON")
    out.add_argument("--csv", action="store_true", help="print the study as long-format CSV (docs/statistics.md)")
    p.add_argument("--out", metavar="FILE",
                   help="also write the JSON study to FILE (as RUN_DIR/certify.json, `lifesearch report RUN_DIR` shows it)")
    add_bootstrap_options(p)
    add_wide(p)
    p.set_defaults(func=run)


def candidate(judgments: list, name: str | None, exclude: str | None) -> tuple[str, list]:
    """The judge X's id and its judgments (`name`: an id, or name#run for one run)."""
    from lifesearch_local.analysis.scoring import judge_name
    from lifesearch_local.errors import LifesearchError

    ids = list(dict.fromkeys(j.judge for j in judgments if j.judge != exclude))
    if name is None:
        if len(ids) != 1:
            raise LifesearchError(f"{len(ids)} judges in the judgments ({', '.join(ids) or 'none'}): pick one with --judge")
        name = ids[0]
    # name#run picks one judge run; a bare id takes all its runs (decisions averaged over them)
    mine = [j for j in judgments if (judge_name(j) if "#" in name else j.judge) == name]
    if not mine:
        raise LifesearchError(f"no judgments by judge {name!r} (found: {', '.join(ids) or 'none'})")
    return mine[0].judge, mine


def fingerprint(path: str | None, judge: str | None):
    """The JudgeIdentity the manifest beside `path` records for `judge`, or None."""
    from lifesearch_local.records import JudgeIdentity

    fp = ((manifest_beside(path) or {}).get("fingerprints") or {}).get(judge) if path and judge else None
    return JudgeIdentity.model_validate(fp) if fp else None


def study(args: argparse.Namespace) -> tuple[dict, list]:
    """The whole study as JSON (and X's judgments, for the caveats)."""
    from lifesearch_local.analysis.agreement import collect_items
    from lifesearch_local.analysis.certify import certify, compare_fingerprints
    from lifesearch_local.analysis.labels import label_index
    from lifesearch_local.cli.agree import load_labels
    from lifesearch_local.records import Judgment, Label
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks

    tasks = load_tasks(args.tasks)
    reference, source = load_labels(args)
    ref_id = args.label_judge.split("#")[0] if args.label_judge else None
    judge, mine = candidate(read_records(args.judgments, Judgment), args.judge, ref_id)
    items, _ = collect_items(tasks, mine, reference)
    human = label_index(read_records(args.human, Label), args.human_source) if args.human else None
    human_items = collect_items(tasks, mine, human)[0] if human else None
    out: dict = {"judge": judge, "reference": source, "human": args.human, "n_reference_labels": len(reference),
                 "n_human_labels": len(human) if human else 0}
    out.update(certify(tasks, items, category_field=args.category_field, human_items=human_items,
                       reference=reference, margin=args.margin, n_resamples=args.resamples, seed=args.seed,
                       names=(judge, source)))
    if human:
        add_ppi(out, tasks, mine, human)
    ref_fp = fingerprint(args.labels_from_judgments, ref_id) or fingerprint(args.labels, source)
    out["fingerprints"] = compare_fingerprints(fingerprint(args.judgments, judge), ref_fp)
    return out, mine


def add_ppi(out: dict, tasks: list, mine: list, human: dict) -> None:
    """agents.<name>.ppi: X's eq.-1 score on every task it judged, corrected with the human-labelled tasks."""
    from lifesearch_local.analysis.ppi import RANDOM_SUBSET, agent_ppi
    from lifesearch_local.analysis.scoring import score_agents
    from lifesearch_local.errors import LifesearchError

    first = [j for j in mine if j.judge_run == min(x.judge_run for x in mine)]
    judged = {j.task_id for j in first}
    try:
        rows = score_agents([t for t in tasks if t.id in judged], first)
    except LifesearchError as e:  # X did not judge every rubric: its eq.-1 scores would be wrong
        for a in out["agents"].values():
            a["ppi"] = {"mean": None, "ci95": None, "n_labelled_tasks": 0, "reason": str(e)}
        return
    for a, entry in out["agents"].items():
        if a in rows:
            entry["ppi"] = agent_ppi(tasks, rows[a], human)
    out["ppi_note"] = f"ppi: the judge's eq.-1 score (0–1, as `score`) corrected with the human labels; {RANDOM_SUBSET}"


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
