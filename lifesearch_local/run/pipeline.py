"""`lifesearch run`: agents → judges → scores → report, phase by phase, each model released before the next."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lifesearch_local.agent.config import AgentConfig
from lifesearch_local.errors import LifesearchError
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Judgment, Report, Task
from lifesearch_local.run.config import RunConfig
from lifesearch_local.rundir.directory import (
    CONFIG,
    JUDGMENTS,
    LABELS,
    REPORTEVAL,
    REPORTS,
    SCORES,
    TASKS,
    TRAJECTORIES,
    WEB_CACHE,
    RunDir,
    open_run,
)
from lifesearch_local.rundir.files import write_atomic
from lifesearch_local.rundir.manifest import sha256_file
from lifesearch_local.runtime.signals import StopFlag, graceful_stop
from lifesearch_local.runtime.skeleton import OpenModel
from serving import Engine, JSONError, ModelConfig, RayConfig, loads


@dataclass
class PipelineResult:
    """What a run did; `stopped` means a signal ended it early (rerun to finish)."""

    run_dir: Path
    stopped: bool = False
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    scores: dict[str, Any] | None = None
    report_html: Path | None = None
    wall_s: float = 0.0


PHASES = ("agent", "judge", "reporteval")
# What a run directory holds that a failed first invocation must not delete (the rest is rewritten from the inputs).
WORK = (JUDGMENTS, REPORTEVAL, TRAJECTORIES, WEB_CACHE)


@dataclass
class _Run:
    """What every phase of one pipeline invocation needs."""

    rd: RunDir
    cfg: RunConfig
    tasks: list[Task]
    stop: StopFlag
    show: bool
    today: dt.date | None
    result: PipelineResult
    open_model: OpenModel | None
    force_config: bool = False


def run_pipeline(cfg: RunConfig, *, command: str = "run", show: bool = True, today: dt.date | None = None,
                 phases: tuple[str, ...] = PHASES, open_model: OpenModel | None = None,
                 force_config: bool = False) -> PipelineResult:
    """Run (or resume) the pipeline of `cfg` in its run directory: agents, judges, ReportEval,
    scores, report (`phases` picks a subset). Each phase loads its model (in-process or as Ray
    actors; `open_model` replaces that in tests) only if it has work left, and releases it
    before the next phase. The run directory is opened as every command opens one (`open_run`:
    locked for the whole run as `command`, the source files hashed, removed again if this run
    made it and failed before any WORK); one holding a run with another config is refused
    unless `force_config`."""
    cfg = resolve(cfg)
    sources = {"tasks_source": cfg.tasks, "reports_source": cfg.reports, "labels_source": cfg.labels}
    with open_run(cfg.out_dir(), command, inputs=sources, keep=WORK):
        return _pipeline(cfg, show, today, phases, open_model, force_config)


def _pipeline(cfg: RunConfig, show: bool, today: dt.date | None, phases: tuple[str, ...],
              open_model: OpenModel | None, force_config: bool) -> PipelineResult:
    from lifesearch_local.estimate.dry_run import record_actual, record_run_estimate
    from serving import ray_session

    t0 = time.perf_counter()
    rd = prepare_run_dir(cfg, force_config=force_config)
    result = PipelineResult(run_dir=rd.path)
    import_reports(rd, cfg)
    est = record_run_estimate(rd, cfg, phases, today)  # the actual figures go beside it at the end
    # One Ray cluster for all phases; a signal while a model loads stops before its phase starts.
    with ray_session(cfg.ray), graceful_stop() as stop:
        run = _Run(rd, cfg, _load_tasks(rd), stop, show, today, result, open_model, force_config)
        steps = [functools.partial(_agent_phase, agent=a) for a in cfg.agents if "agent" in phases]
        steps += [functools.partial(_judge_phase, judge=j) for j in cfg.all_judges() if "judge" in phases]
        if cfg.reporteval is not None and "reporteval" in phases:
            steps += [functools.partial(_reporteval_phase, judge=j) for j in cfg.all_judges()]
        for step in steps:
            result.stopped = step(run)
            if result.stopped:
                record_actual(rd, est, result.stages, round(time.perf_counter() - t0, 3))
                return _done(result, t0)
    result.scores = write_scores(rd, cfg, run.tasks, rd.load(REPORTS, Report))
    from lifesearch_local.output.report import write_report

    record_actual(rd, est, result.stages, round(time.perf_counter() - t0, 3))  # for report.html to show
    result.report_html = write_report(rd.path)
    return _done(result, t0)


@contextlib.contextmanager
def _phase(run: _Run, name: str, model: ModelConfig) -> Iterator[OpenModel]:
    """How the phase's stage opens its model; on exit, if it did, what the phase held: wall
    seconds (model load included) and GPU-seconds (wall × GPUs held), the cost a rerun from
    cache avoids."""
    from lifesearch_local.runtime.skeleton import default_open

    loaded: list[bool] = []

    def open_model(m: ModelConfig, ray: RayConfig | None) -> AbstractContextManager[Engine]:
        loaded.append(True)
        return run.open_model(m, ray) if run.open_model else default_open(m, ray, name)

    t0 = time.perf_counter()
    yield open_model
    if loaded:
        _record_cost(run, name, model, time.perf_counter() - t0)


def _record_cost(run: _Run, name: str, model: ModelConfig, wall: float) -> dict[str, Any]:
    from lifesearch_local.llm.models import random_weights
    from serving import gpus_held

    gpus = gpus_held(model, run.cfg.ray)
    # random_weights: report.html puts a warning next to scores that come from untrained models
    cost = {"phase_wall_s": round(wall, 3), "gpus": gpus, "gpu_s": round(wall * gpus, 1),
            "model": model.model, "random_weights": random_weights(model)}
    run.result.stages.setdefault(name, {}).update(cost)
    run.rd.update_manifest(stage=(name, cost))
    return cost


def resolve(cfg: RunConfig) -> RunConfig:
    """Fill what the config leaves implicit: a web cache inside the run directory when the mode needs one."""
    web = cfg.web
    if web.mode != "live" and web.cache_dir is None:
        web = web.model_copy(update={"cache_dir": Path(cfg.out_dir()) / WEB_CACHE})
    return cfg.model_copy(update={"web": web})


def prepare_run_dir(cfg: RunConfig, *, force_config: bool = False) -> RunDir:
    """config.yaml (resolved) and tasks.jsonl (filtered by task_ids); a different existing run is
    refused unless `force_config` (each stage then still checks its own records' settings)."""
    import yaml

    from lifesearch_local.rundir.jsonl import dumps
    from lifesearch_local.tasks import load_tasks, select_tasks

    rd = RunDir(cfg.out_dir())
    if not force_config:
        _check_same_run(rd.file(CONFIG), cfg)
    write_atomic(rd.file(CONFIG), yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True))
    tasks = select_tasks(load_tasks(cfg.tasks), cfg.task_ids)
    _write_once(rd.file(TASKS), "".join(dumps(t) + "\n" for t in tasks), TASKS)
    if cfg.labels:
        _copy_labels(Path(cfg.labels), rd.file(LABELS), None if cfg.task_ids is None else {t.id for t in tasks})
    rd.update_manifest(hashes={"config": sha256_file(rd.file(CONFIG)), "tasks": sha256_file(rd.file(TASKS))},
                       seeds={"run": cfg.seed})
    return rd


def _copy_labels(src: Path, dst: Path, task_ids: set[str] | None) -> None:
    """The labels file, only its lines of the selected tasks when `task_ids` selects some: labels of
    tasks outside the run are not a mismatch for the agreement check."""
    if task_ids is None:
        write_atomic(dst, src.read_bytes())
        return
    def other_task(line: bytes) -> bool:  # a malformed line is kept for the label loader to report
        try:
            row = loads(line)
        except JSONError:
            return False
        return isinstance(row, dict) and isinstance(row.get("task_id"), str) and row["task_id"] not in task_ids

    lines = src.read_bytes().splitlines(keepends=True)  # bytes: a line that is not UTF-8 is the loader's to report
    write_atomic(dst, b"".join(x for x in lines if x.strip() and not other_task(x)))


def _check_same_run(path: Path, cfg: RunConfig) -> None:
    """Refuse a run directory whose config.yaml differs from `cfg` in a setting that changes a
    result (serving.affects): where models run and where the run lives may change (`ray`, `out`,
    a judge's device, an agent's concurrency), so a run may resume on Ray after starting in-process."""
    from lifesearch_local.errors import InputError
    from lifesearch_local.run.config import load_run_config
    from serving import result_settings

    if not path.exists():
        return
    try:
        old = load_run_config(path)
    except InputError as e:
        raise LifesearchError(f"{path.parent}: its config.yaml does not load in this version of lifesearch "
                              f"({e.field + ': ' if e.field else ''}{e.message}); use another `out` (or --fresh to "
                              "start this one over)") from None
    if result_settings(old) != result_settings(cfg):
        raise LifesearchError(f"{path.parent}: holds a run with a different config.yaml; use another `out` "
                              "(or --fresh to start this one over, or --force-config to continue it)")


def _write_once(path: Path, text: str, what: str) -> None:
    if path.exists() and path.read_text(encoding="utf-8") != text:
        raise LifesearchError(f"{path.parent}: holds a run with a different {what}; use another `out` "
                              "(or --fresh to start this one over)")
    write_atomic(path, text)


def _load_tasks(rd: RunDir) -> list[Task]:
    from lifesearch_local.tasks import load_tasks

    return load_tasks(rd.file(TASKS))


def import_reports(rd: RunDir, cfg: RunConfig) -> None:
    """`reports:` in the config: existing reports of the selected tasks, judged as if an agent wrote them here."""
    if not cfg.reports:
        return
    from lifesearch_local.rundir.jsonl import read_records

    ids = {t.id for t in _load_tasks(rd)}
    done = rd.done_keys(REPORTS, Report, lambda r: r.key)
    new = [r for r in read_records(cfg.reports, Report) if r.task_id in ids and r.key not in done]
    rd.append(REPORTS, new)


def _agent_phase(run: _Run, *, agent: AgentConfig) -> bool:
    """One agent over every pending (task, run), its model loaded for this phase only. True if stopped."""
    from lifesearch_local.agent.stage import agent_stage

    if run.stop:
        return True
    name = f"agent/{agent.id}"
    with _phase(run, name, agent.model) as open_model:
        stats = agent_stage(run.rd, run.tasks, agent, None, run.cfg.web, runs=run.cfg.runs, show=run.show,
                            today=run.today, force_config=run.force_config, ray=run.cfg.ray, open_model=open_model)
    if stats["pending"]:
        run.result.stages.setdefault(name, {}).update(stats)
    return bool(stats.get("stopped_early"))


def _judge_phase(run: _Run, *, judge: JudgeConfig) -> bool:
    """One judge over every report's unjudged rubrics, its model loaded only if something is left. True if stopped."""
    from lifesearch_local.judge.stage import judge_stage

    if run.stop:
        return True
    name = f"judge/{judge.id}"
    with _phase(run, name, judge.model) as open_model:
        stats = judge_stage(run.rd, run.tasks, run.rd.load(REPORTS, Report), judge, show=run.show,
                            ray=run.cfg.ray, open_model=open_model, force_config=run.force_config)
    if stats["decisions"]:
        run.result.stages.setdefault(name, {}).update(stats)
    return bool(stats.get("stopped_early"))


def _reporteval_phase(run: _Run, *, judge: JudgeConfig) -> bool:
    """ReportEval quality / redundancy / factuality of every report with this judge. True if stopped."""
    from lifesearch_local.reporteval.stage import report_items, reporteval_stage

    if run.stop:
        return True
    items = report_items(run.rd.load(REPORTS, Report), run.tasks)
    name = f"reporteval/{judge.id}"
    with _phase(run, name, judge.model) as open_model:
        stats = reporteval_stage(run.rd, items, judge, run.cfg.reporteval, run.cfg.web, ray=run.cfg.ray,
                                 show=run.show, force_config=run.force_config, open_model=open_model)["stats"]
    run.result.stages.setdefault(name, {}).update(stats)
    return bool(stats.get("stopped_early"))


def write_scores(rd: RunDir, cfg: RunConfig, tasks: list[Task], reports: list[Report]) -> dict[str, Any] | None:
    """scores.json: the paper's eq. 1 per judge and agent (None when the config has no judge)."""
    from lifesearch_local.analysis.scoring import score_by_judge, scores_json, uncertainty_by_judge

    ids = {j.id for j in cfg.all_judges()}
    judgments = [j for j in rd.load(JUDGMENTS, Judgment) if j.judge in ids]
    if not judgments:
        return None
    by_judge = score_by_judge(tasks, judgments, reports=reports)
    unc = uncertainty_by_judge(tasks, judgments, by_judge)  # the CIs `lifesearch score --json` prints
    write_atomic(rd.file(SCORES), json.dumps(scores_json(by_judge, unc), indent=2, ensure_ascii=False) + "\n")
    return by_judge


def _done(result: PipelineResult, t0: float) -> PipelineResult:
    result.wall_s = round(time.perf_counter() - t0, 3)
    rd = RunDir(result.run_dir)
    before = ((rd.manifest().stages if rd.manifest() else {}).get("run") or {})
    rd.update_manifest(stage=("run", {  # totals over every invocation (a resumed run adds up)
        "wall_s": round(before.get("wall_s", 0.0) + result.wall_s, 3), "last_wall_s": result.wall_s,
        "invocations": before.get("invocations", 0) + 1, "stopped_early": result.stopped}))
    return result
