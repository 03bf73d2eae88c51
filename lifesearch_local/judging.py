"""The judge stage of a run directory: resumable, one judgment line per rubric, stats in the manifest."""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import ExitStack

from serving.config import RayConfig
from serving.progress_hook import reporting
from serving.protocol import ModelBackend
from serving.stop import honoured, until_stopped

from .config import JudgeConfig
from .errors import LifesearchError
from .judge import is_empty_report, judge_batches, pending_work
from .progress import progress_bar
from .prompts import load_template
from .records import Judgment, Report, Task
from .signals import graceful_stop
from .store import RunDir, config_hash, resume_config


def judge_stage(
    rd: RunDir,
    tasks: Sequence[Task],
    reports: Sequence[Report],
    cfg: JudgeConfig,
    backend: ModelBackend | None = None,
    *,
    show: bool = True,
    ray: RayConfig | None = None,
    force_config: bool = False,
) -> dict:
    """Judge every rubric of every report not yet in `judgments.jsonl`; returns the stage stats.

    Holds the run directory's lock. A judge id with judgments already made under other settings
    is refused (ConfigChanged) unless `force_config`. The model is loaded only if something is
    left to judge (empty reports are not sent to it): in-process, or with `ray` as a pool of
    Ray actors that lives for this stage only. Each report's judgments are appended as soon as
    they exist. SIGTERM stops after the current report or batch (records flushed); rerunning
    the same command finishes the work.
    """
    by_id = {t.id: t for t in tasks}
    unknown = sorted({r.task_id for r in reports} - by_id.keys())
    if unknown:
        raise LifesearchError(f"reports for tasks not in the tasks file: {', '.join(unknown[:5])}")
    with rd.locked("judge"):
        return _judge_locked(rd, by_id, reports, cfg, backend, show, ray, force_config)


def keep_legacy_id(rd: RunDir, cfg: JudgeConfig, legacy: str | None) -> JudgeConfig:
    """The config under its pre-derivation default id when the run directory holds judgments
    under that id and none under the derived one, so that a rerun resumes them instead of
    judging everything again under a new id (the stage's config check still applies)."""
    if legacy is None or not cfg.derived or legacy == cfg.id or not rd.file("judgments.jsonl").is_file():
        return cfg
    judges = {j.judge for j in rd.load("judgments.jsonl", Judgment)}
    if legacy not in judges or cfg.id in judges:
        return cfg
    print(f"judge {cfg.id}: {rd.path} holds judgments under the earlier default id {legacy}; continuing under it")
    return cfg.updated(id=legacy)


def _judge_locked(rd: RunDir, by_id: dict[str, Task], reports: Sequence[Report], cfg: JudgeConfig,
                  backend: ModelBackend | None, show: bool, ray: RayConfig | None, force_config: bool) -> dict:
    done = rd.done_keys("judgments.jsonl", Judgment, lambda j: j.key)
    rd.check_config(f"judge/{cfg.id}", resume_config(cfg), resuming=any(k[0] == cfg.id for k in done),
                    force=force_config, legacy=(f"config/judge/{cfg.id}", config_hash(cfg)))
    t0, decisions, stopped = time.perf_counter(), 0, False
    with graceful_stop() as stop, honoured(stop.event), ExitStack() as models:
        for judge_run in range(cfg.runs):
            work = pending_work(by_id, reports, done, cfg.id, judge_run)
            total = sum(len(p.rubrics) for p in work)
            if not total:
                continue
            if backend is None and not all(is_empty_report(p.report) for p in work):
                from serving.registry import open_backend

                backend = models.enter_context(open_backend(cfg.model, ray, phase=f"judge-{cfg.id}"))
            desc = f"judge {cfg.id}" + (f" run {judge_run}" if cfg.runs > 1 else "")
            # the bar counts decisions as the kernel computes them, then settles on what was written
            with progress_bar(total, desc=desc, unit="decision", show=show) as bar, reporting(bar.advance):
                written = 0
                for _reports, rows in until_stopped(judge_batches(backend, cfg, work, judge_run)):
                    flat = [j for row in rows for j in row]
                    rd.append("judgments.jsonl", flat)
                    decisions += len(flat)
                    written += len(flat)
                    bar.advance_to(written)
                    if stop:
                        stopped = True
                        break
            if stopped or stop:  # a model call may have given up mid-report on SIGTERM
                stopped = True
                break
    stats = _stats(backend, cfg, decisions, time.perf_counter() - t0, stopped)
    _record(rd, cfg, backend, stats)
    return stats


def _record(rd: RunDir, cfg: JudgeConfig, backend: ModelBackend | None, stats: dict) -> None:
    """What this judge stage was run with (config, prompts, model) and what it did, in the manifest."""
    rd.update_manifest(
        hashes={
            f"config/judge/{cfg.id}": config_hash(cfg),
            "prompts/judge_en": load_template("judge_en")[1],
            "prompts/judge_zh": load_template("judge_zh")[1],
            **({f"model/{cfg.id}": backend.model_hash()} if hasattr(backend, "model_hash") else {}),
        },
        seeds={f"judge/{cfg.id}": cfg.model.seed},
        stage=(f"judge/{cfg.id}", stats),
    )


def _stats(backend, cfg: JudgeConfig, decisions: int, wall: float, stopped: bool) -> dict:
    from serving.tiny import random_weights

    stats = {"backend": cfg.model.backend, "model": cfg.model.model, "random_weights": random_weights(cfg.model),
             "mode": cfg.mode, "decisions": decisions,
             "wall_s": round(wall, 3), "decisions_per_s": round(decisions / wall, 2) if wall and decisions else 0.0,
             "stopped_early": stopped}
    scorer = getattr(backend, "scorer", None)
    if scorer is not None and cfg.mode == "choice" and scorer.stats.decisions:
        k = scorer.stats
        stats.update(kernel_form=scorer.form, forward_tokens=k.forward_tokens, prompt_tokens=k.prompt_tokens,
                     forward_passes=k.passes, tokens_per_s=round(k.forward_tokens / k.seconds, 1) if k.seconds else 0.0)
    gen = getattr(backend, "stats", None)
    if isinstance(gen, dict):
        stats.update({k: v for k, v in gen.items() if v})
    return stats
