"""`lifesearch sweep`: several judge configs × k runs over the same reports, compared with labels."""

from __future__ import annotations

import argparse
import json
import sys

from .common import add_force_config, add_quiet, print_caveats


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
    p.add_argument("--runs", type=int, help="judge repetitions per config that samples (generate mode, temperature "
                   "> 0; overrides its runs); a deterministic judge runs once, since its repeats would agree exactly")
    p.add_argument("--reports", help="reports JSONL to judge instead of the config's `reports:`")
    p.add_argument("--out", help="output directory (default runs/<name>-sweep)")
    p.add_argument("--json", action="store_true", help="print the agreement JSON")
    add_force_config(p, "the judgments of a judge id")
    add_quiet(p)
    p.set_defaults(func=run)


def sweep_inputs(args: argparse.Namespace):
    """(config, tasks, reports, labels) of a sweep: `--reports` replaces the config's, and
    `task_ids:` narrows the tasks, their reports and their labels."""
    from ..config import load_run_config
    from ..errors import LifesearchError
    from ..jsonl import read_records
    from ..pipeline import select_tasks
    from ..records import Label, Report
    from ..tasks import load_tasks

    cfg = load_run_config(args.config)
    if args.reports:
        cfg = cfg.model_copy(update={"reports": args.reports})
    if not (cfg.reports and cfg.labels and cfg.all_judges()):
        raise LifesearchError(f"{args.config}: a sweep needs `reports:` (or --reports), `labels:` and `judges:`")
    tasks = select_tasks(load_tasks(cfg.tasks), cfg.task_ids)
    ids = {t.id for t in tasks}
    reports = [r for r in read_records(cfg.reports, Report) if r.task_id in ids]
    labels = [lab for lab in read_records(cfg.labels, Label) if lab.task_id in ids]
    return cfg, tasks, reports, labels


def run(args: argparse.Namespace) -> int:
    from serving.ray.session import ray_session

    from ..agreement import agreement
    from ..judge.stage import judge_stage
    from ..labels import label_index
    from ..preflight import preflight
    from ..records import Judgment
    from ..report.data import input_paths
    from ..store import RunDir, sha256_file
    from ..tables import print_agreement

    cfg, tasks, reports, labels = sweep_inputs(args)
    judges, ids = cfg.all_judges(), {t.id for t in tasks}
    preflight([(f"judge {j.id}", j.model) for j in judges], cfg.ray)
    rd = RunDir(args.out or f"runs/{cfg.name}-sweep")
    print(f"sweep {len(judges)} judge config(s) over {len(reports)} reports -> {rd.path}")
    rd.update_manifest(hashes={"tasks": sha256_file(cfg.tasks), "reports": sha256_file(cfg.reports),
                               "labels": sha256_file(cfg.labels), "config": sha256_file(args.config)},
                       inputs=input_paths(tasks=cfg.tasks, reports=cfg.reports, labels=cfg.labels))  # for `lifesearch report`
    with rd.locked("sweep"), ray_session(cfg.ray):  # one Ray cluster for all judge phases
        for judge in judges:
            judge = judge.model_copy(update={"runs": sweep_runs(judge, args.runs)})
            # the model is loaded (in-process or as Ray actors) only if something is left to judge
            stats = judge_stage(rd, tasks, reports, judge, ray=cfg.ray, show=not args.quiet,
                                force_config=args.force_config)
            print(f"judge {judge.id} × {judge.runs} run(s): {stats['decisions']} new decisions in {stats['wall_s']} s")
    judge_ids = {j.id for j in judges}
    judgments = [j for j in rd.load("judgments.jsonl", Judgment) if j.judge in judge_ids and j.task_id in ids]
    result = agreement(tasks, judgments, label_index(labels))
    (rd.file("agreement.json")).write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_agreement(result, ", ".join(sorted({lab.source for lab in labels})), len(labels))
    # under the table, where its numbers would otherwise read as a finding
    print_caveats(args.json, judges=judges, judgments=judgments)
    print(f"sweep results: {rd.file('judgments.jsonl')}, {rd.file('agreement.json')}",
          file=sys.stderr if args.json else sys.stdout)
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
