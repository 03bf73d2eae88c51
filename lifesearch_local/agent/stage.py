"""The agent stage of a run directory: every (task, run) of one agent, concurrently, resumable."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections import Counter
from collections.abc import Sequence
from typing import Any

from lifesearch_local.agent.config import AgentConfig
from lifesearch_local.agent.loop import run_task
from lifesearch_local.agent.tools import Tool, WebHandles, build_tools
from lifesearch_local.agent.trajectory import TrajectoryLog
from lifesearch_local.llm.prompts import load_template
from lifesearch_local.records import Report, Task
from lifesearch_local.rundir.directory import REPORTS, RunDir
from lifesearch_local.rundir.manifest import config_hash, resume_config
from lifesearch_local.runtime.concurrency import map_bounded, run_sync
from lifesearch_local.runtime.progress import progress_bar
from lifesearch_local.runtime.signals import StopFlag
from lifesearch_local.runtime.skeleton import OpenModel, open_stage
from lifesearch_local.web.config import WebConfig
from serving import Engine, RayConfig


def pending_runs(done: set, tasks: Sequence[Task], cfg: AgentConfig, runs: int) -> list[tuple[Task, int]]:
    """(task, run) pairs of this agent with no report yet (`done`: the (task, agent, run) keys of
    reports.jsonl); unfinished ones restart from scratch."""
    return [(t, r) for r in range(runs) for t in tasks if (t.id, cfg.id, r) not in done]


def agent_stage(rd: RunDir, tasks: Sequence[Task], cfg: AgentConfig, backend: Engine | None, web: WebConfig, *,
                runs: int = 1, show: bool = True, web_handles: WebHandles | None = None,
                today: dt.date | None = None, force_config: bool = False, ray: RayConfig | None = None,
                open_model: OpenModel | None = None) -> dict[str, Any]:
    """Run every pending (task, run) of one agent; reports go to reports.jsonl as each finishes.

    Holds the run directory's lock; an agent id with reports made under other settings is
    refused (ConfigChanged) unless `force_config`. The model (`backend`, else opened in-process
    or on Ray) is loaded only if a run is pending. SIGTERM: every task finishes its current
    step, nothing new starts, unfinished runs write no report (a rerun restarts them); returns
    with `stopped_early`. Returns the stage stats, also merged into the manifest under `agent/<id>`.
    """
    with open_stage(rd, f"agent/{cfg.id}", command="agent", settings=resume_config(cfg),
                    recorded=lambda: rd.done_keys(REPORTS, Report, lambda r: r.key),
                    resuming=lambda done: any(agent == cfg.id for _, agent, _ in done),
                    force=force_config, model=cfg.model,
                    ray=ray, engine=backend, open_model=open_model, honour_stop=False) as st:
        work = pending_runs(st.recorded, tasks, cfg, runs)
        if work:  # loaded here, in the main thread, before the tasks' workers start
            st.engine.open()
        already = len(tasks) * runs - len(work)  # a resumed run's bar says so
        reports, counters = run_sync(lambda: _run_all(rd, work, cfg, st.engine, web, st.stop, show, web_handles, today,
                                                      already))
        st.close_engine()
        stats = _stats(cfg, work, reports, counters, st.wall(), bool(st.stop))
        engine = st.engine.stats()  # e.g. hf token counts, the Ray pool's replicas and retries
        if engine:
            stats["backend_stats"] = {k: v for k, v in engine.items() if isinstance(v, (int, float, str))}
        if work:  # a rerun with nothing left keeps the last run's figures
            st.record(stats, hashes={f"config/agent/{cfg.id}": config_hash(cfg),
                                     "prompts/agent_system": load_template("agent_system")[1],
                                     "prompts/tool_python": load_template("tool_python")[1]},
                      seeds={f"agent/{cfg.id}": cfg.seed}, model_key=cfg.id)
    return stats


async def _run_all(rd: RunDir, work: list[tuple[Task, int]], cfg: AgentConfig, backend: Engine, web: WebConfig,
                   stop: StopFlag, show: bool, handles: WebHandles | None, today: dt.date | None, already: int = 0):
    from serving import BatchingBackend

    if not work:
        return [], {}
    batcher = BatchingBackend(backend, max_batch=cfg.batch.max_batch, max_wait_s=cfg.batch.max_wait_ms / 1000,
                              max_inflight=cfg.batch.max_inflight)
    needs_web = any(n.startswith("web_") for n in cfg.tools.enabled)
    own = handles is None and needs_web
    handles = WebHandles(web, offline=cfg.tools.offline) if own else handles
    try:
        tools = build_tools(cfg, handles)
        if needs_web:  # build the search index (if any) before the clock of the first task starts
            await asyncio.to_thread(_warm, handles)
        reports = await _run_tasks(rd, work, cfg, batcher, tools, stop, show, today, already)
        await batcher.aclose()
        return reports, {"engine": batcher.stats, **(handles.stats() if handles else {})}
    finally:
        if own:
            await handles.aclose()


def _warm(handles: WebHandles) -> None:
    # A backend that cannot start reports its error on each search instead.
    with contextlib.suppress(Exception):
        handles.searcher.backend  # noqa: B018 - built on first access


async def _run_tasks(rd: RunDir, work: list[tuple[Task, int]], cfg: AgentConfig, batcher: Any, tools: dict[str, Tool],
                     stop: StopFlag, show: bool, today: dt.date | None, already: int = 0) -> list[Report]:
    with progress_bar(len(work), desc=f"agent {cfg.id}", unit="task", show=show, already=already) as bar:

        async def one(item: tuple[Task, int]) -> Report | None:
            task, run = item
            log = TrajectoryLog(rd.path, task.id, cfg.id, run)
            report = await run_task(task, run, cfg, batcher.generate, tools, log, stop=stop, today=today,
                                    on_step=lambda n: bar.advance(0, iterations=1, tokens=n))
            if report is not None:
                rd.append(REPORTS, [report])
                bar.advance(1)
            return report

        results = await map_bounded(one, work, limit=cfg.concurrency, show=False)
    return [r for r in results if r is not None]


def _stats(cfg: AgentConfig, work: list, reports: list[Report], counters: dict[str, Any], wall: float, stopped: bool) -> dict[str, Any]:
    engine = counters.get("engine", {})
    iterations = sum(r.iterations or 0 for r in reports)
    out_tokens = engine.get("output_tokens", 0)
    return {
        "backend": cfg.model.backend, "model": cfg.model.model, "pending": len(work), "finished": len(reports),
        "status": dict(Counter(r.status for r in reports)), "iterations": iterations,
        "model_calls": engine.get("requests", 0), "batches": engine.get("batches", 0),
        "max_batch": engine.get("max_batch", 0), "prompt_tokens": engine.get("prompt_tokens", 0),
        "output_tokens": out_tokens, "engine_s": round(engine.get("engine_s", 0.0), 3), "wall_s": round(wall, 3),
        "iterations_per_s": round(engine.get("requests", 0) / wall, 3) if wall and work else 0.0,
        "tokens_per_s": round(out_tokens / wall, 1) if wall and work else 0.0,
        "web": {k: v for k, v in counters.items() if k != "engine"}, "stopped_early": stopped,
    }
