"""The judge stage of a run directory: resumable, one judgment line per rubric, stats in the manifest."""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import ExitStack

from serving.config import RayConfig
from serving.protocol import ModelBackend

from .config import JudgeConfig
from .errors import LifesearchError
from .judge import judge_batches, pending_work
from .progress import progress_bar
from .prompts import load_template
from .records import Judgment, Report, Task
from .signals import graceful_stop
from .store import RunDir, config_hash


def judge_stage(
    rd: RunDir,
    tasks: Sequence[Task],
    reports: Sequence[Report],
    cfg: JudgeConfig,
    backend: ModelBackend | None = None,
    *,
    show: bool = True,
    ray: RayConfig | None = None,
) -> dict:
    """Judge every rubric of every report not yet in `judgments.jsonl`; returns the stage stats.

    The model is loaded only if something is left to judge: in-process, or with `ray` as a
    pool of Ray actors that lives for this stage only. SIGTERM stops after the current batch
    (records flushed); rerunning the same command finishes the work.
    """
    by_id = {t.id: t for t in tasks}
    unknown = sorted({r.task_id for r in reports} - by_id.keys())
    if unknown:
        raise LifesearchError(f"reports for tasks not in the tasks file: {', '.join(unknown[:5])}")
    done = rd.done_keys("judgments.jsonl", Judgment, lambda j: j.key)
    t0, decisions, stopped = time.perf_counter(), 0, False
    with graceful_stop() as stop, ExitStack() as models:
        for judge_run in range(cfg.runs):
            work = pending_work(by_id, reports, done, cfg.id, judge_run)
            total = sum(len(p.rubrics) for p in work)
            if not total:
                continue
            if backend is None:
                from serving.registry import open_backend

                backend = models.enter_context(open_backend(cfg.model, ray, phase=f"judge-{cfg.id}"))
            desc = f"judge {cfg.id}" + (f" run {judge_run}" if cfg.runs > 1 else "")
            with progress_bar(total, desc=desc, unit="decision", show=show) as bar:
                for _batch, rows in judge_batches(backend, cfg, work, judge_run):
                    flat = [j for row in rows for j in row]
                    rd.append("judgments.jsonl", flat)
                    decisions += len(flat)
                    bar.advance(len(flat))
                    if stop:
                        stopped = True
                        break
            if stopped:
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
    stats = {"backend": cfg.model.backend, "model": cfg.model.model, "mode": cfg.mode, "decisions": decisions,
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
