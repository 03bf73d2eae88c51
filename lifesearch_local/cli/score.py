"""`lifesearch score`: the paper's eq. (1) over a judgments file, per judge and agent."""

from __future__ import annotations

import argparse
import json
import sys

from lifesearch_local.cli.common import (
    add_task_ids,
    add_wide,
    manifest_beside,
    no_limit_with_ids,
    positive_int,
    print_caveats,
    seed_int,
    selected_task_ids,
)


def add_bootstrap_options(p: argparse.ArgumentParser) -> None:
    """--resamples and --seed of the bootstrap and permutation tests (recorded in the output)."""
    from lifesearch_local.analysis.resampling import DEFAULT_RESAMPLES, DEFAULT_SEED

    p.add_argument("--resamples", type=positive_int, default=DEFAULT_RESAMPLES, metavar="B",
                   help=f"bootstrap resamples and random sign flips (default {DEFAULT_RESAMPLES})")
    p.add_argument("--seed", type=seed_int, default=DEFAULT_SEED,
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
    add_task_ids(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON instead of tables (with ci95, comparisons)")
    out.add_argument("--csv", action="store_true",
                     help="print long-format CSV: one row per judge × agent × metric, then one per agent pair "
                     "(columns in docs/statistics.md)")
    p.add_argument("--compare", action="store_true",
                   help="print every agent pair: difference with its paired 95%% CI, sign-flip p, Holm p")
    add_ppi_options(p)
    add_bootstrap_options(p)
    add_wide(p)
    p.set_defaults(func=run)


def add_ppi_options(p: argparse.ArgumentParser) -> None:
    """--ppi --labels H [--label-source S]: prediction-powered scores (docs/statistics.md)."""
    p.add_argument("--ppi", action="store_true",
                   help="add each agent's prediction-powered score (PPI++): the judge's score on every task "
                   "corrected with the tasks the --labels cover; they must be a random subset of the tasks. A normal "
                   "two-sided 95%% interval (none below 30 labelled tasks), beside the labels-only mean and its "
                   "interval")
    p.add_argument("--labels", metavar="H", help="with --ppi: human labels (Label records) on some tasks' rubrics")
    p.add_argument("--label-source", metavar="S", help="with --ppi: keep only labels with this source")
    p.add_argument("--finite-population", action="store_true",
                   help="with --ppi: estimate the mean over exactly these tasks (finite-population correction; the "
                   "labelled tasks a simple random sample of them) instead of the default estimand, the mean over "
                   "the population of tasks these are a sample of (PPI++; conservative for these tasks alone)")


def read_ppi_labels(args: argparse.Namespace, tasks: list) -> list | None:
    """The --labels of --ppi (None without --ppi), refused when some are for tasks the tasks file lacks
    (as certify refuses them): dropping them silently would correct the scores with fewer labels."""
    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.records import Label
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import check_known_tasks

    if bool(args.ppi) != bool(args.labels):
        raise LifesearchError("--ppi and --labels H go together: the human labels correct the judge's scores")
    if args.finite_population and not args.ppi:
        raise LifesearchError("--finite-population goes with --ppi --labels H")
    if not args.ppi:
        return None
    labels = read_records(args.labels, Label)
    check_known_tasks(tasks, (lab.task_id for lab in labels), args.tasks, "label")
    return labels


def ppi_scores(args: argparse.Namespace, tasks: list, by_judge: dict, labels: list | None) -> dict | None:
    """judge → agent → PPI score with --ppi (analysis.ppi.ppi_by_judge), else None."""
    from lifesearch_local.analysis.labels import label_index
    from lifesearch_local.analysis.ppi import ppi_by_judge

    if labels is None:
        return None
    return ppi_by_judge(tasks, by_judge, label_index(labels, args.label_source),
                        finite_population=args.finite_population)


def with_ppi(result: dict, ppi: dict) -> dict:
    """`score --json` with agents.<name>.ppi and the note that the labelled tasks must be a random subset."""
    from lifesearch_local.analysis.ppi import RANDOM_SUBSET

    per = result["judges"] if "judges" in result else {result["judge"]: result}
    for name, entry in per.items():
        for agent, row in entry["agents"].items():
            row["ppi"] = ppi[name][agent]
    result["ppi_note"] = f"agents.<name>.ppi: the judge's score corrected with human labels (PPI++); {RANDOM_SUBSET}"
    return result


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.analysis.scoring import (
        incomplete_advice,
        score_by_judge,
        scores_json,
        split_by_judge,
        uncertainty_by_judge,
    )
    from lifesearch_local.analysis.truncation import agent_cuts, report_cuts
    from lifesearch_local.cli.tables import print_scores
    from lifesearch_local.errors import IncompleteRunError
    from lifesearch_local.output.csv_rows import SCORE_COLUMNS, score_rows, to_csv
    from lifesearch_local.records import Judgment, Report
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import check_known_tasks, chosen_tasks, first_tasks, load_tasks

    tasks = load_tasks(args.tasks)
    judgments = read_records(args.judgments, Judgment)
    manifest = manifest_beside(args.judgments)  # before any output: a damaged one stops the command
    reports = read_records(args.reports, Report) if args.reports else []
    check_known_tasks(tasks, (j.task_id for j in judgments), args.tasks)
    labels = read_ppi_labels(args, tasks)
    ids = selected_task_ids(args)
    if ids is not None:
        no_limit_with_ids(args)
        tasks, judgments, reports = chosen_tasks(tasks, ids, args.tasks, judgments, reports)
        print(f"--task-ids: scoring {len(tasks)} task(s)", file=sys.stderr)
    if args.limit is not None and args.limit < len(tasks):
        tasks, judgments, reports = first_tasks(tasks, args.limit, judgments, reports)
        print(f"--limit {args.limit}: scoring the first {len(tasks)} tasks", file=sys.stderr)
    try:
        by_judge = score_by_judge(tasks, judgments, judge=args.judge, allow_missing=args.allow_missing, reports=reports)
    except IncompleteRunError as e:
        raise IncompleteRunError(incomplete_advice(e, rerun_command(args))) from None
    unc = uncertainty_by_judge(tasks, judgments, by_judge, n_resamples=args.resamples, seed=args.seed)
    ppi = ppi_scores(args, tasks, by_judge, labels)
    shown = [j for name, js in split_by_judge(judgments).items() if name in by_judge for j in js]
    texts = reports or reports_beside(args.judgments)  # the lengths behind the share of each report seen
    per_report = report_cuts(shown, texts)
    cuts = agent_cuts(per_report)
    if args.json:
        result = with_truncation(scores_json(by_judge, unc), cuts, per_report)
        print(json.dumps(with_ppi(result, ppi) if ppi else result, indent=2, ensure_ascii=False))
    elif args.csv:
        sys.stdout.write(to_csv(SCORE_COLUMNS, score_rows(by_judge, unc, cuts) + (ppi_rows(ppi) if ppi else [])))
    else:
        print_scores(by_judge, unc, compare=args.compare, cuts=cuts)
        if ppi:
            print_ppi(ppi)
    print_caveats(args.json or args.csv, manifest=manifest, judgments=shown, reports=texts)
    return 0


def with_truncation(result: dict, cuts: dict, per_report: list) -> dict:
    """`score --json` with agents.<name>.truncation (reports, reports_cut, tokens_cut, median_share_seen)
    and, per judge, `cut_reports`: each report it read only part of (tokens cut, share seen)."""
    from lifesearch_local.analysis.truncation import SHARE_BASIS

    per = result["judges"] if "judges" in result else {result["judge"]: result}
    for name, entry in per.items():
        for agent, row in entry["agents"].items():
            row["truncation"] = cuts[name][agent].as_json() if agent in cuts.get(name, {}) else None
        entry["cut_reports"] = [c.as_json() for c in per_report if c.judge == name and c.tokens_cut]
    result["truncation_note"] = f"agents.<name>.truncation.median_share_seen: over the cut reports, the {SHARE_BASIS}"
    return result


def reports_beside(judgments_path: str) -> list:
    """The reports.jsonl of the run directory holding the judgments ([] when there is none, or when it
    cannot be read: it only gives the lengths behind the share of a cut report seen)."""
    from pathlib import Path

    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.records import Report
    from lifesearch_local.rundir.jsonl import read_records

    path = Path(judgments_path).parent / "reports.jsonl"
    try:
        return read_records(path, Report) if path.is_file() else []
    except LifesearchError:
        return []


def rerun_command(args: argparse.Namespace) -> str:
    """The `score` command that failed, as the user can rerun it (shell-quoted), less any task selection."""
    import shlex

    parts = ["lifesearch", "score", "--tasks", args.tasks, "--judgments", args.judgments]
    parts += ["--judge", args.judge] if args.judge else []
    parts += ["--reports", args.reports] if args.reports else []
    return shlex.join(parts)


def ppi_rows(ppi: dict) -> list[dict]:
    """`score --csv --ppi`: per judge × agent, metric `ppi` and `labels_only` (0–1), n_tasks = the labelled tasks."""
    rows = []
    for j, agents in ppi.items():
        for a, p in agents.items():
            for metric, value, ci in (("ppi", p["mean"], p["ci95"]), ("labels_only", p["labels_only"], p.get("labels_only_ci95"))):
                rows.append({"judge": j, "agent": a, "metric": metric, "value": value, "ci_lo": (ci or [None])[0],
                             "ci_hi": (ci or [None, None])[1], "n_tasks": p["n_labelled_tasks"]})
    return rows


def print_ppi(ppi: dict) -> None:
    from lifesearch_local.analysis.ppi import RANDOM_SUBSET
    from lifesearch_local.output.study import ppi_table
    from lifesearch_local.output.terminal import console

    out = console()
    for judge, agents in ppi.items():
        out.print(ppi_table(judge, agents))
    estimand = next((p.get("estimand") for agents in ppi.values() for p in agents.values() if p.get("estimand")), "")
    out.print(f"PPI++ (power-tuned, task level; normal two-sided 95% intervals; labels only = the same with λ = 0). "
              f"Estimand: {estimand}. {RANDOM_SUBSET}", highlight=False)
