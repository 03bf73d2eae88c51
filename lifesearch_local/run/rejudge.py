"""`lifesearch rejudge`: a sample of a run's recorded decisions judged again with the recorded settings.

The settings are the run's own: the judge block of its config.yaml when that is the config the
judgments were made with, else the manifest's `stage_configs` (the settings that change a
verdict; where and how fast it runs take their defaults). The replay runs in this process (never
on Ray), on the same tasks and reports (the run directory's, else the files its manifest names,
refused if they changed since). Decisions made without the model (empty reports), on a rubric
edited since, or by a judge with no recorded settings (imported judgments, panels) are not sampled.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from collections import defaultdict
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from lifesearch_local.errors import LifesearchError
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.fingerprint import judge_identity
from lifesearch_local.judge.rubric import Pending, is_empty_report, judge_batches, rubric_hash
from lifesearch_local.records import Judgment, Manifest, Replay, Report, Task
from lifesearch_local.rundir.directory import CONFIG, JUDGMENTS, REPORTS, TASKS, RunDir, recorded_input
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.rundir.manifest import resume_config
from lifesearch_local.runtime.skeleton import OpenModel, default_open
from serving import Engine, ModelConfig, RayConfig

log = logging.getLogger(__name__)


def rejudge(run_dir: str | Path, sample: int, *, seed: int = 0, judge: str | None = None,
            open_model: OpenModel | None = None) -> Replay:
    """Judge `sample` recorded decisions of `run_dir` (drawn with `seed`; only `judge`'s if given)
    again, each with its judge's recorded settings, holding the directory's lock; the replay
    (how many, the largest |Δp_true|, the verdicts that flipped, how each judge's fingerprint
    differs from the recorded one) is appended to the manifest's `replays` and returned."""
    t0 = time.perf_counter()
    if not (Path(run_dir) / JUDGMENTS).is_file():
        raise LifesearchError(f"{run_dir}: no {JUDGMENTS}: not a run directory with judgments to replay")
    rd = RunDir(run_dir)
    with rd.locked("rejudge"):
        m = rd.manifest()
        if m is None:
            raise LifesearchError(f"{rd.path}: no manifest.json: the settings the judgments were made with are unknown")
        configs = recorded_judges(rd, m)
        if judge is not None and judge not in configs:
            raise LifesearchError(f"{rd.path}: no recorded settings for judge {judge!r} (judges with settings: "
                                  f"{', '.join(configs) or 'none'})")
        tasks = {t.id: t for t in _tasks(rd, m)}
        reports = {r.key: r for r in read_records(_input(rd, m, REPORTS), Report)}
        pool = eligible(rd.load(JUDGMENTS, Judgment), configs, tasks, reports, judge)
        if not pool:
            raise LifesearchError(f"{rd.path}: no recorded decision can be replayed (none made by a model with "
                                  "recorded settings on the current rubrics)")
        picked = random.Random(seed).sample(pool, min(sample, len(pool)))
        dps, flips, diffs = [], 0, {}
        for jid, rows in _by_judge(picked).items():
            log.info("rejudge: %d decision(s) of judge %s", len(rows), jid)
            pairs, diffs[jid] = _replay_judge(configs[jid], m, rows, tasks, reports, open_model or _open)
            flips += sum(old.satisfied != new.satisfied for old, new in pairs)
            dps += [abs(old.p_true - new.p_true) for old, new in pairs if old.p_true is not None and new.p_true is not None]
        replay = Replay(at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), seed=seed,
                        sampled=len(picked), eligible=len(pool), max_abs_dp=max(dps) if dps else None, flips=flips,
                        judges=diffs, wall_s=round(time.perf_counter() - t0, 3))
        rd.update_manifest(replays=[*(rd.manifest() or m).replays, replay])
    return replay


def _open(model: ModelConfig, ray: RayConfig | None) -> AbstractContextManager[Engine]:
    return default_open(model, ray, "rejudge")


def recorded_judges(rd: RunDir, m: Manifest) -> dict[str, JudgeConfig]:
    """Judge id -> the config its judgments were made with: config.yaml's when its verdict settings
    are the recorded ones, else rebuilt from the manifest's `stage_configs`."""
    from lifesearch_local.run.config import load_judge_configs

    written: dict[str, JudgeConfig] = {}
    if rd.file(CONFIG).is_file():
        try:
            written = {c.id: c for c in load_judge_configs(rd.file(CONFIG))}
        except LifesearchError as e:  # another version's config.yaml: the manifest still says
            log.warning("warning: %s does not load (%s); using the manifest's recorded settings", rd.file(CONFIG), e)
    out = {}
    for stage, settings in m.stage_configs.items():
        if not stage.startswith("judge/"):
            continue
        cfg = written.get(stage.removeprefix("judge/"))
        out[stage.removeprefix("judge/")] = (
            cfg if cfg is not None and resume_config(cfg) == settings else JudgeConfig.model_validate(settings))
    return out


def eligible(judgments: Sequence[Judgment], configs: dict[str, JudgeConfig], tasks: dict[str, Task],
             reports: dict[tuple[str, str, int], Report], judge: str | None = None) -> list[Judgment]:
    """The recorded decisions a replay may sample, in file order: made by a judge with recorded
    settings (`judge` only, if given), by its model (not an empty report's), on a rubric whose
    text is what it was then."""
    out = []
    for j in judgments:
        if j.judge not in configs or (judge is not None and j.judge != judge):
            continue
        task, report = tasks.get(j.task_id), reports.get((j.task_id, j.agent, j.run))
        rubric = next((r for r in task.rubrics if r.id == j.rubric_id), None) if task else None
        if rubric is None or report is None or is_empty_report(report):
            continue
        if j.rubric_hash is None or j.rubric_hash == rubric_hash(task, rubric):
            out.append(j)
    return out


def _by_judge(picked: Sequence[Judgment]) -> dict[str, list[Judgment]]:
    out: dict[str, list[Judgment]] = defaultdict(list)
    for j in sorted(picked, key=lambda j: j.key):
        out[j.judge].append(j)
    return dict(out)


def _replay_judge(cfg: JudgeConfig, m: Manifest, rows: Sequence[Judgment], tasks: dict[str, Task],
                  reports: dict[tuple[str, str, int], Report],
                  open_model: OpenModel) -> tuple[list[tuple[Judgment, Judgment]], list[str]]:
    """One judge's sampled decisions judged again on its model, and how its fingerprint now
    differs from the recorded one."""
    with open_model(cfg.model, None) as engine:
        before = m.fingerprints.get(cfg.id)
        now = judge_identity(cfg, engine)
        return _replay(engine, cfg, rows, tasks, reports), before.differences(now) if before else ["no fingerprint recorded"]


def _replay(engine: Engine, cfg: JudgeConfig, rows: Sequence[Judgment], tasks: dict[str, Task],
            reports: dict[tuple[str, str, int], Report]) -> list[tuple[Judgment, Judgment]]:
    """(recorded, now) for each row: its rubrics judged again report by report, each judge run
    with its own seed as the judge stage does."""
    pairs = []
    for judge_run in sorted({j.judge_run for j in rows}):
        mine = {(j.task_id, j.agent, j.run, j.rubric_id): j for j in rows if j.judge_run == judge_run}
        wanted: dict[tuple[str, str, int], set[str]] = defaultdict(set)
        for t, a, r, rub in mine:
            wanted[(t, a, r)].add(rub)
        work = [Pending(tasks[k[0]], reports[k], [r for r in tasks[k[0]].rubrics if r.id in ids])
                for k, ids in wanted.items()]
        for _, judged in judge_batches(engine, cfg, work, judge_run):
            pairs += [(mine[(j.task_id, j.agent, j.run, j.rubric_id)], j) for row in judged for j in row]
    return pairs


def _tasks(rd: RunDir, m: Manifest) -> list[Task]:
    from lifesearch_local.tasks import load_tasks

    return load_tasks(_input(rd, m, TASKS))


def _input(rd: RunDir, m: Manifest, name: str) -> Path:
    """The run directory's `name` file, else the input its manifest records (refused when it changed since)."""
    stem = name.removesuffix(".jsonl")
    found = recorded_input(rd.path, stem, m.model_dump(),
                           why="a replay on other inputs would not be one")
    if found is None:
        raise LifesearchError(f"{rd.path}: no {name} and no {stem} file recorded in its manifest: the inputs the "
                              "judgments were made from are not at hand")
    return found
