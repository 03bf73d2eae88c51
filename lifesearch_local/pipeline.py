"""`lifesearch run`: agents → judges → scores → report, phase by phase, each model released before the next."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import RunConfig
from .errors import LifesearchError
from .records import Judgment, Report, Task
from .signals import StopFlag, graceful_stop
from .store import RunDir, sha256_file

OpenModel = Callable[..., Any]  # (ModelConfig, RayConfig | None) -> context manager yielding a ModelBackend


@dataclass
class PipelineResult:
    """What a run did; `stopped` means a signal ended it early (rerun to finish)."""

    run_dir: Path
    stopped: bool = False
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    scores: dict[str, Any] | None = None
    report_html: Path | None = None
    wall_s: float = 0.0


def run_pipeline(cfg: RunConfig, *, open_model: OpenModel | None = None, show: bool = True,
                 today: dt.date | None = None) -> PipelineResult:
    """Run (or resume) the whole pipeline of `cfg` in its run directory."""
    from serving.open import open_backend

    open_model = open_model or open_backend
    t0 = time.perf_counter()
    cfg = resolve(cfg)
    rd = prepare_run_dir(cfg)
    tasks = _load_tasks(rd)
    result = PipelineResult(run_dir=rd.path)
    import_reports(rd, cfg)
    with graceful_stop() as stop:  # a signal while a model loads stops the run before its phase starts
        for agent in cfg.agents:
            result.stopped = _agent_phase(rd, cfg, agent, tasks, open_model, stop, show, today, result)
            if result.stopped:
                return _done(result, t0)
        reports = rd.load("reports.jsonl", Report)
        for judge in cfg.all_judges():
            result.stopped = _judge_phase(rd, judge, tasks, reports, open_model, cfg, stop, show, result)
            if result.stopped:
                return _done(result, t0)
    result.scores = write_scores(rd, cfg, tasks, reports)
    from .report_html import write_report

    result.report_html = write_report(rd.path)
    return _done(result, t0)


def resolve(cfg: RunConfig) -> RunConfig:
    """Fill what the config leaves implicit: a web cache inside the run directory when the mode needs one."""
    web = cfg.web
    if web.mode != "live" and web.cache_dir is None:
        web = web.model_copy(update={"cache_dir": Path(cfg.out_dir()) / "web_cache"})
    return cfg.model_copy(update={"web": web})


def prepare_run_dir(cfg: RunConfig) -> RunDir:
    """config.yaml (resolved) and tasks.jsonl (filtered by task_ids); a different existing run is refused."""
    import yaml

    from .jsonl import dumps
    from .tasks import load_tasks

    rd = RunDir(cfg.out_dir())
    _check_same_run(rd.file("config.yaml"), cfg)
    rd.file("config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True))
    tasks = select_tasks(load_tasks(cfg.tasks), cfg.task_ids)
    _write_once(rd.file("tasks.jsonl"), "".join(dumps(t) + "\n" for t in tasks), "tasks.jsonl")
    if cfg.labels:
        shutil.copyfile(cfg.labels, rd.file("labels.jsonl"))
    rd.update_manifest(hashes={"config": sha256_file(rd.file("config.yaml")), "tasks": sha256_file(rd.file("tasks.jsonl")),
                               "tasks_source": sha256_file(cfg.tasks)}, seeds={"run": cfg.seed})
    return rd


# Where models run and where the run lives do not change what it computes: a run may resume
# in-process after starting on Ray, or the other way round.
_EXECUTION_ONLY = {"ray", "out", "name"}


def _check_same_run(path: Path, cfg: RunConfig) -> None:
    from .config import load_run_config

    if path.exists():
        old = load_run_config(path).model_dump(mode="json", exclude=_EXECUTION_ONLY)
        if old != cfg.model_dump(mode="json", exclude=_EXECUTION_ONLY):
            raise LifesearchError(f"{path.parent}: holds a run with a different config.yaml; use another `out` "
                                  "(or --fresh to start this one over)")


def _write_once(path: Path, text: str, what: str) -> None:
    if path.exists() and path.read_text(encoding="utf-8") != text:
        raise LifesearchError(f"{path.parent}: holds a run with a different {what}; use another `out` "
                              "(or --fresh to start this one over)")
    path.write_text(text, encoding="utf-8")


def select_tasks(tasks: list[Task], ids: list[str] | None) -> list[Task]:
    """The tasks named by `ids` (file order), or all."""
    if ids is None:
        return tasks
    unknown = sorted(set(ids) - {t.id for t in tasks})
    if unknown:
        raise LifesearchError(f"task_ids not in the tasks file: {', '.join(unknown)}")
    return [t for t in tasks if t.id in set(ids)]


def _load_tasks(rd: RunDir) -> list[Task]:
    from .tasks import load_tasks

    return load_tasks(rd.file("tasks.jsonl"))


def import_reports(rd: RunDir, cfg: RunConfig) -> None:
    """`reports:` in the config: existing reports of the selected tasks, judged as if an agent wrote them here."""
    if not cfg.reports:
        return
    from .jsonl import read_records

    ids = {t.id for t in _load_tasks(rd)}
    done = rd.done_keys("reports.jsonl", Report, lambda r: r.key)
    new = [r for r in read_records(cfg.reports, Report) if r.task_id in ids and r.key not in done]
    rd.append("reports.jsonl", new)
    rd.update_manifest(hashes={"reports_source": sha256_file(cfg.reports)})


def _agent_phase(rd: RunDir, cfg: RunConfig, agent: Any, tasks: list[Task], open_model: OpenModel, stop: StopFlag,
                 show: bool, today: dt.date | None, result: PipelineResult) -> bool:
    """One agent over every pending (task, run), its model loaded for this phase only. True if stopped."""
    from .agent.stage import agent_stage, pending_runs

    if stop or not pending_runs(rd, tasks, agent, cfg.runs):
        return bool(stop)
    with open_model(agent.model, cfg.ray) as backend:
        if stop:
            return True
        stats = agent_stage(rd, tasks, agent, backend, cfg.web, runs=cfg.runs, show=show, today=today)
    result.stages[f"agent/{agent.id}"] = stats
    return bool(stats.get("stopped_early"))


def _judge_phase(rd: RunDir, judge: Any, tasks: list[Task], reports: list[Report], open_model: OpenModel,
                 cfg: RunConfig, stop: StopFlag, show: bool, result: PipelineResult) -> bool:
    """One judge over every report's unjudged rubrics, its model loaded only if something is left. True if stopped."""
    from .judge import pending_work
    from .judging import judge_stage

    done = rd.done_keys("judgments.jsonl", Judgment, lambda j: j.key)
    by_id = {t.id: t for t in tasks}
    if stop or not any(pending_work(by_id, reports, done, judge.id, r) for r in range(judge.runs)):
        return bool(stop)
    with open_model(judge.model, cfg.ray) as backend:
        if stop:
            return True
        stats = judge_stage(rd, tasks, reports, judge, backend, show=show)
    result.stages[f"judge/{judge.id}"] = stats
    return bool(stats.get("stopped_early"))


def write_scores(rd: RunDir, cfg: RunConfig, tasks: list[Task], reports: list[Report]) -> dict[str, Any] | None:
    """scores.json: the paper's eq. 1 per judge and agent (None when the config has no judge)."""
    from .cli.score import scores_json
    from .scoring import score_by_judge

    ids = {j.id for j in cfg.all_judges()}
    judgments = [j for j in rd.load("judgments.jsonl", Judgment) if j.judge in ids]
    if not judgments:
        return None
    by_judge = score_by_judge(tasks, judgments, reports=reports)
    rd.file("scores.json").write_text(json.dumps(scores_json(by_judge), indent=2, ensure_ascii=False) + "\n")
    return by_judge


def _done(result: PipelineResult, t0: float) -> PipelineResult:
    result.wall_s = round(time.perf_counter() - t0, 3)
    RunDir(result.run_dir).update_manifest(stage=("run", {"wall_s": result.wall_s, "stopped_early": result.stopped}))
    return result
