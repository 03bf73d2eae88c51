"""The judge stage of a run directory: resumable, one judgment line per rubric, stats in the manifest."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from lifesearch_local.errors import LifesearchError
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.fingerprint import check_identity, judge_identity
from lifesearch_local.judge.rubric import judge_batches, pending_work, rubric_hash
from lifesearch_local.llm.models import random_weights
from lifesearch_local.llm.prompts import load_template
from lifesearch_local.records import Judgment, Report, Task
from lifesearch_local.rundir.directory import JUDGMENTS, RunDir
from lifesearch_local.rundir.manifest import ConfigChanged, config_hash, resume_config
from lifesearch_local.runtime.progress import progress_bar
from lifesearch_local.runtime.skeleton import OpenModel, Stage, open_stage
from serving import Engine, RayConfig, reporting, until_stopped

log = logging.getLogger(__name__)


def judge_stage(
    rd: RunDir,
    tasks: Sequence[Task],
    reports: Sequence[Report],
    cfg: JudgeConfig,
    backend: Engine | None = None,
    *,
    show: bool = True,
    ray: RayConfig | None = None,
    open_model: OpenModel | None = None,
    force_config: bool = False,
) -> dict:
    """Judge every rubric of every report not yet in `judgments.jsonl`; returns the stage stats.

    Holds the run directory's lock. A judge id with judgments already made under other settings
    is refused (ConfigChanged) unless `force_config`, and so is another judge under the same id
    (its fingerprint, recorded in the manifest once the model is loaded). The model is loaded
    only if something is left to judge (empty reports are not sent to it): `backend` if given, else in-process, or
    with `ray` as a pool of Ray actors that lives for this stage only. Each report's judgments
    are appended as soon as they exist. SIGTERM stops after the current report or batch
    (records flushed); rerunning the same command finishes the work.
    """
    by_id = {t.id: t for t in tasks}
    unknown = sorted({r.task_id for r in reports} - by_id.keys())
    if unknown:
        raise LifesearchError(f"reports for tasks not in the tasks file: {', '.join(unknown[:5])}")
    guard = _Guard(rd, cfg, by_id, force_config)
    with open_stage(rd, guard.stage, command="judge", settings=resume_config(cfg),
                    recorded=lambda: rd.load(JUDGMENTS, Judgment), resuming=lambda recs: any(j.judge == cfg.id for j in recs),
                    force=force_config, model=cfg.model, ray=ray, engine=backend, open_model=open_model,
                    stamps=lambda recs: Counter(j.settings for j in recs if j.judge == cfg.id), check=guard.records,
                    on_open=guard.engine) as st:
        done = {j.key for j in st.recorded}
        decisions, stopped = _judge_all(st, by_id, reports, cfg, done, show, st.stamp)
        st.close_engine()
        stats = _stats(st, cfg, decisions, stopped)
        if decisions or stopped:  # a rerun with nothing left keeps the last run's figures
            st.record(stats, hashes={f"config/judge/{cfg.id}": config_hash(cfg),
                                     "prompts/judge_en": load_template("judge_en")[1],
                                     "prompts/judge_zh": load_template("judge_zh")[1]},
                      seeds={f"judge/{cfg.id}": cfg.model.seed}, model_key=cfg.id)
    return stats


@dataclass
class _Guard:
    """What the judge stage refuses before adding to a judge id's judgments (ConfigChanged, unless `force`), beyond
    judgments made under other settings (`open_stage` refuses those): `open_stage` hands `records` what it read
    under the lock, and `engine` the model once it is loaded, before its first decision."""

    rd: RunDir
    cfg: JudgeConfig
    by_id: dict[str, Task]
    force: bool
    resuming: bool = False
    """Whether the id has judgments here already (known once `records` has run)."""

    @property
    def stage(self) -> str:
        return f"judge/{self.cfg.id}"

    def records(self, recorded: list[Judgment]) -> None:
        """The id's judgments made on a rubric changed since."""
        mine = [j for j in recorded if j.judge == self.cfg.id]
        self.resuming = bool(mine)
        _refuse_stale(self.rd, self.stage, self.by_id, mine, self.force)

    def engine(self, engine: Engine) -> None:
        """Another judge under the same id: another fingerprint than the manifest's (then this one is recorded)."""
        check_identity(self.rd, self.stage, judge_identity(self.cfg, engine), resuming=self.resuming, force=self.force)


def _refuse_stale(rd: RunDir, stage: str, by_id: dict[str, Task], mine: list[Judgment], force: bool) -> None:
    """Verdicts made on a question or rubric that has changed since are refused (ConfigChanged),
    not silently kept as if made on the new text, nor judged again under the same key; with
    `force` they are kept, and said."""
    now = {(t.id, r.id): rubric_hash(t, r) for t in by_id.values() for r in t.rubrics}
    stale = sorted({(j.task_id, j.rubric_id) for j in mine
                    if j.rubric_hash and now.get((j.task_id, j.rubric_id), j.rubric_hash) != j.rubric_hash})
    if not stale:
        return
    names = ", ".join(f"{t}/{r}" for t, r in stale[:5]) + (", …" if len(stale) > 5 else "")
    msg = (f"{rd.path}: {stage} has verdicts on {len(stale)} rubric(s) whose question or text changed since they "
           f"were judged ({names})")
    if not force:
        raise ConfigChanged(f"{msg}; judge the edited tasks under a new --id (those verdicts are not re-judged under "
                            "the same id), or pass --force-config to keep them")
    log.warning("warning: --force-config: %s; they are kept", msg)


def _judge_all(st: Stage, by_id: dict[str, Task], reports: Sequence[Report], cfg: JudgeConfig, done: set,
               show: bool, stamp: str) -> tuple[int, bool]:
    """Every judge run's pending rubrics, report by report: (the decisions written, whether a
    signal stopped it with work left). A signal after the last record stops nothing: the stage is finished."""
    decisions = 0
    for judge_run in range(cfg.runs):
        work = pending_work(by_id, reports, done, cfg.id, judge_run)
        total = sum(len(p.rubrics) for p in work)
        if not total:
            continue
        if st.stop:  # a signal came before this run began: no model is loaded for it
            return decisions, True
        desc = f"judge {cfg.id}" + (f" run {judge_run}" if cfg.runs > 1 else "")
        keys = {r.key for r in reports}
        already = sum(1 for k in done if k[:2] == (cfg.id, judge_run) and k[2:5] in keys)  # a resumed run's
        batches = judge_batches(st.engine, cfg, work, judge_run)  # a generator: nothing is judged before the loop
        # the bar counts decisions as the kernel computes them, then settles on what was written
        with progress_bar(total, desc=desc, unit="decision", show=show, already=already) as bar, reporting(bar.advance):
            written = 0
            for _reports, rows in until_stopped(batches):
                flat = [j.model_copy(update={"settings": stamp}) for row in rows for j in row]
                st.rd.append(JUDGMENTS, flat)
                decisions += len(flat)
                written += len(flat)
                bar.advance_to(written)
                if st.stop:
                    break
        if st.stop and written < total:  # a model call may have given up mid-report on SIGTERM
            return decisions, True
    return decisions, False


def _stats(st: Stage, cfg: JudgeConfig, decisions: int, stopped: bool) -> dict:
    wall = st.wall()
    stats = {"backend": cfg.model.backend, "model": cfg.model.model, "random_weights": random_weights(cfg.model),
             "mode": cfg.mode, "decisions": decisions,
             "wall_s": wall, "decisions_per_s": round(decisions / wall, 2) if wall and decisions else 0.0,
             "stopped_early": stopped}
    start = getattr(st.engine, "open_s", None)
    if start is not None and decisions and wall > start:  # the rate once the engine is up, start-up apart
        stats.update(engine_start_s=start, steady_decisions_per_s=round(decisions / (wall - start), 3))
    engine = st.engine.stats()
    kernel_s = engine.pop("kernel_seconds", None)
    if cfg.mode != "choice":  # the kernel's counters describe choice scoring only
        for k in ("kernel_form", "kernel_attention", "forward_tokens", "prompt_tokens", "forward_passes"):
            engine.pop(k, None)
    elif "forward_tokens" in engine:
        engine["tokens_per_s"] = round(engine["forward_tokens"] / kernel_s, 1) if kernel_s else 0.0
    stats.update({k: v for k, v in engine.items() if v})
    return stats
