"""Stand-alone stages (`judge`, `sweep`, `reporteval`) as library calls beside the pipeline's phases.

Each opens its run directory through `rundir.directory.open_run` (created, locked, inputs hashed), then runs
the stage functions, which check and record their own settings (`runtime.skeleton.open_stage`). The CLI
modules only parse arguments and print.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lifesearch_local.estimate.cost import Calibrate, Estimate
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Judgment, Label, Report, Task
from lifesearch_local.rundir.directory import AGREEMENT, JUDGMENTS, REPORTEVAL, WEB_CACHE, RunDir, open_run
from serving import RayConfig

# After each judge: (its config, its stats, the run directory) -> False to stop (a signal stopped it).
AfterJudge = Callable[[JudgeConfig, dict[str, Any], RunDir], bool]
# A line of the command's own output (what it cut, where it writes): the CLI prints it.
Say = Callable[[str], None]


@dataclass(frozen=True)
class JudgeInvocation:
    """One `lifesearch judge`: where it writes, what it reads, its judges, and what it is cut to."""

    out: str | Path
    """The run directory."""
    tasks: str | Path
    """Tasks JSONL."""
    reports: str | Path
    """Reports JSONL."""
    judges: Sequence[JudgeConfig]
    """The judge configs, run one after another."""
    ray: RayConfig | None = None
    """Ray settings (None: in-process)."""
    limit: int | None = None
    """Only the first `limit` tasks of the file (and their reports)."""
    task_ids: set[str] | None = None
    """Only these tasks (and their reports)."""
    force_config: bool = False
    """Add to judgments another config made."""
    show: bool = True
    """Progress bars."""
    dry_run: Calibrate | None = None
    """Estimate only, judging nothing, finding the engines' profiles this way (auto: stored, calibrating what
    is missing; always; never); None judges."""


def judge_inputs(inv: JudgeInvocation, say: Say) -> tuple[list[Task], list[Report]]:
    """The tasks and reports a `judge` invocation works on (its task ids, then its limit, applied and said)."""
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import chosen_tasks, first_tasks, load_tasks

    tasks, reports = load_tasks(inv.tasks), read_records(inv.reports, Report)
    if inv.task_ids is not None:
        kept, mine = chosen_tasks(tasks, inv.task_ids, inv.tasks, reports)
        say(f"--task-ids: judging {len(kept)} of {len(tasks)} tasks and their {len(mine)} of {len(reports)} reports")
        tasks, reports = kept, mine
    limit = inv.limit
    if limit is None:
        return tasks, reports
    if limit >= len(tasks):
        say(f"--limit {limit}: the tasks file has {len(tasks)} tasks, judging all of them")
        return tasks, reports
    kept, mine = first_tasks(tasks, limit, reports)
    say(f"--limit {limit}: judging {len(kept)} of {len(tasks)} tasks ({', '.join(t.id for t in kept[:5])}"
        f"{', …' if limit > 5 else ''}) and their {len(mine)} of {len(reports)} reports")
    return kept, mine


def judge_run(inv: JudgeInvocation, *, after: AfterJudge, say: Say) -> tuple[Estimate, int] | None:
    """`lifesearch judge`: every judge config over the reports (resumable), in `inv.out`; `say` gets what
    --limit or --task-ids cut. Models are checked before the run directory exists (a dry run's only when it
    may calibrate). A dry run returns its estimate and how many reports it covers, and creates nothing; a run
    returns None, and its manifest gets the invocation's estimate at its start and what it took at its end."""
    from lifesearch_local.estimate.dry_run import estimate_judge, recorded_estimate
    from lifesearch_local.judge.stage import judge_stage
    from lifesearch_local.run.preflight import preflight
    from serving import ray_session

    tasks, reports = judge_inputs(inv, say)
    # a dry run reads OUT as it finds it (when it exists) and never creates it
    existing = RunDir(inv.out) if inv.dry_run is not None and Path(inv.out).is_dir() else None
    if inv.dry_run != "never":  # before the run directory exists
        preflight([(f"judge {c.id}", c.model) for c in inv.judges], inv.ray, dry_run=inv.dry_run is not None)
    if inv.dry_run is not None:
        est = estimate_judge(existing, tasks, reports, inv.judges, ray=inv.ray, calibrate=inv.dry_run, local_only=False)
        return est, len(reports)
    # the run's own estimate is made under the lock, over the directory it holds, from stored profiles only: no
    # model is loaded for it
    with open_run(inv.out, "judge", inputs={"tasks": inv.tasks, "reports": inv.reports}, keep=(JUDGMENTS,)) as rd, \
            ray_session(inv.ray), \
            recorded_estimate(rd, "judge", lambda: estimate_judge(rd, tasks, reports, inv.judges, ray=inv.ray,
                                                                  calibrate="never", local_only=True)) as took:
        busy = busy_line(inv.judges)  # the machine as the judge finds it: said and recorded beside its rate
        for cfg in inv.judges:
            stats = judge_stage(rd, tasks, reports, cfg, show=inv.show, ray=inv.ray, force_config=inv.force_config)
            if busy:
                stats["machine_busy"] = busy
            took[f"judge/{cfg.id}"] = stats
            if not after(cfg, stats, rd):
                break
    return None


def busy_line(judges: Sequence[JudgeConfig]) -> str | None:
    """One line when this machine is busier than a local judge's threads allow (its timings will show it);
    None when it is not, or when every judge is an endpoint (its machine is not this one)."""
    from serving import contention

    return contention().line() if any(j.model.backend != "openai" for j in judges) else None


def sweep_inputs(config_path: str, reports: str | None = None) -> tuple[Any, list[Task], list[Report], list[Label]]:
    """(config, tasks, reports, labels) of a sweep: `reports` replaces the config's, and
    `task_ids:` narrows the tasks, their reports and their labels."""
    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.run.config import load_run_config
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks, select_tasks

    cfg = load_run_config(config_path)
    if reports:
        cfg = cfg.model_copy(update={"reports": reports})
    if not (cfg.reports and cfg.labels and cfg.all_judges()):
        raise LifesearchError(f"{config_path}: a sweep needs `reports:` (or --reports), `labels:` and `judges:`")
    tasks = select_tasks(load_tasks(cfg.tasks), cfg.task_ids)
    ids = {t.id for t in tasks}
    return (cfg, tasks, [r for r in read_records(cfg.reports, Report) if r.task_id in ids],
            [lab for lab in read_records(cfg.labels, Label) if lab.task_id in ids])


def sweep_run(config_path: str, *, out: str | None = None, reports: str | None = None,
              runs: Callable[[JudgeConfig], int], after: AfterJudge, say: Say, show: bool = True,
              force_config: bool = False) -> tuple[RunDir, list[JudgeConfig], list[Label], dict[str, Any], dict[str, Any]]:
    """`lifesearch sweep`: each judge config of the YAML (`runs(judge)` repetitions) over the same
    reports, then the agreement with the labels and its cluster-bootstrap CIs, written to
    `agreement.json`; returns (run directory, judges, labels, agreement, its uncertainty:
    bootstrap settings and judge-vs-judge comparisons). `say` gets the line naming the work and its directory."""
    import json

    from lifesearch_local.analysis.agreement import agreement
    from lifesearch_local.analysis.agreement_ci import agreement_uncertainty
    from lifesearch_local.analysis.labels import label_index
    from lifesearch_local.judge.stage import judge_stage
    from lifesearch_local.run.preflight import preflight
    from lifesearch_local.rundir.files import write_atomic
    from serving import ray_session

    cfg, tasks, reports_, labels = sweep_inputs(config_path, reports)
    judges, ids = cfg.all_judges(), {t.id for t in tasks}
    preflight([(f"judge {j.id}", j.model) for j in judges], cfg.ray)
    inputs = {"tasks": cfg.tasks, "reports": cfg.reports, "labels": cfg.labels, "config": config_path}
    with open_run(out or f"runs/{cfg.name}-sweep", "sweep", inputs=inputs) as rd, ray_session(cfg.ray):
        say(f"sweep {len(judges)} judge config(s) over {len(reports_)} reports -> {rd.path}")
        for judge in judges:
            judge = judge.model_copy(update={"runs": runs(judge)})
            # the model is loaded (in-process or as Ray actors) only if something is left to judge
            after(judge, judge_stage(rd, tasks, reports_, judge, ray=cfg.ray, show=show, force_config=force_config), rd)
        judge_ids = {j.id for j in judges}
        judgments = [j for j in rd.load(JUDGMENTS, Judgment) if j.judge in judge_ids and j.task_id in ids]
        index = label_index(labels)
        result = agreement(tasks, judgments, index)
        unc = agreement_uncertainty(tasks, judgments, index, result)  # adds each judge's ci95 to result
        write_atomic(rd.file(AGREEMENT), json.dumps(result, indent=2) + "\n")
    return rd, judges, labels, result, unc


def default_web_cache(out: str | Path) -> Path:
    """The web cache of a run directory, `web_cache/`; a directory holding an earlier version's
    `webcache/` instead is refused (LifesearchError), not silently given a second, empty cache."""
    from lifesearch_local.errors import LifesearchError

    if (Path(out) / "webcache").is_dir() and not (Path(out) / WEB_CACHE).exists():
        raise LifesearchError(f"{out}: holds webcache/, the web cache of an earlier version of lifesearch; "
                              f"pass it as --cache {Path(out) / 'webcache'}, or use a fresh directory")
    return Path(out) / WEB_CACHE


def reporteval_run(out: str | Path, reports_path: str | Path, tasks_path: str | Path | None, judges: Sequence[JudgeConfig],
                   rcfg: Any, web: Any, *, ray: Any = None, show: bool = True, force_config: bool = False,
                   after: Callable[[JudgeConfig, dict[str, Any], RunDir], bool]) -> None:
    """`lifesearch reporteval`: ReportEval of the reports with each judge config, in `out`;
    `after(cfg, result, rd)` gets each judge's stats and summary, False stops."""
    from lifesearch_local.reporteval.stage import report_items, reporteval_stage
    from lifesearch_local.run.preflight import preflight
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks

    tasks = load_tasks(tasks_path) if tasks_path else None
    items = report_items(read_records(reports_path, Report), tasks)
    preflight([(f"judge {c.id}", c.model) for c in judges])  # before the output directory exists
    with open_run(out, "reporteval", inputs={"reports": reports_path, "tasks": tasks_path}, keep=(REPORTEVAL, WEB_CACHE)) as rd:
        for cfg in judges:
            res = reporteval_stage(rd, items, cfg, rcfg, web, ray=ray, show=show, force_config=force_config)
            if not after(cfg, res, rd):
                return
