"""`lifesearch sweep`: several judge configs × k runs over the same reports, compared with labels."""

from __future__ import annotations

import argparse
import json
import sys

from lifesearch_local.cli.common import (
    add_force_config,
    add_quiet,
    add_wide,
    print_caveats,
    runs_int,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="compare judge configs against labels (Table 3)",
        description="Run every judge config of a run YAML (`judges:`) k times over the same reports "
        "(`reports:`), one phase per judge model (in-process, or Ray actors when the YAML has `ray:`), "
        "(only judges that sample are repeated: choice mode and temperature 0 give the same verdicts every time), "
        "then print the paper's Table 3 layout against the reference labels (`labels:`), sorted by "
        "mean accuracy; `task_ids:` limits the tasks, reports and labels. Resumable: judgments already in the output directory are kept.",
    )
    p.add_argument("--config", required=True, help="run YAML with tasks, reports, labels and judges")
    p.add_argument("--runs", type=runs_int, help="judge repetitions per config that samples (generate mode, temperature "
                   "> 0; overrides its runs); a deterministic judge runs once, since its repeats would agree exactly")
    p.add_argument("--reports", help="reports JSONL to judge instead of the config's `reports:`")
    p.add_argument("--out", help="output directory (default runs/<name>-sweep)")
    p.add_argument("--json", action="store_true", help="print the agreement JSON")
    add_force_config(p, "the judgments of a judge id")
    add_quiet(p)
    add_wide(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.cli.tables import print_agreement
    from lifesearch_local.records import Judgment
    from lifesearch_local.run.standalone import sweep_run
    from lifesearch_local.rundir.directory import AGREEMENT, JUDGMENTS

    def after(judge, stats: dict, rd) -> bool:
        print(f"judge {judge.id} × {judge.runs} run(s): {stats['decisions']} new decisions in {stats['wall_s']} s")
        return True

    rd, judges, labels, result, unc = sweep_run(args.config, out=args.out, reports=args.reports, after=after, say=print,
                                           runs=lambda j: sweep_runs(j, args.runs), show=not args.quiet,
                                           force_config=args.force_config)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_agreement(result, ", ".join(sorted({lab.source for lab in labels})), len(labels), unc)
    # under the table, where its numbers would otherwise read as a finding
    judge_ids = {j.id for j in judges}
    print_caveats(args.json, judges=judges, judgments=[j for j in rd.load(JUDGMENTS, Judgment) if j.judge in judge_ids])
    print(f"sweep results: {rd.file(JUDGMENTS)}, {rd.file(AGREEMENT)}", file=sys.stderr if args.json else sys.stdout)
    return 0


def samples(judge) -> bool:
    """Whether the judge's verdicts vary between runs: generate mode at temperature > 0."""
    return judge.mode == "generate" and judge.temperature > 0


def sweep_runs(judge, requested: int | None) -> int:
    """Runs of one judge config: as asked when it samples, else one (said once, not silently)."""
    runs = requested or judge.runs
    if runs > 1 and not samples(judge):
        why = "choice mode" if judge.mode == "choice" else "temperature 0"
        print(f"judge {judge.id}: {why} is deterministic; 1 run instead of {runs} (repeats would agree exactly)")
        return 1
    return runs
