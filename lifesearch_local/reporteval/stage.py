"""The ReportEval stage of a run directory: resumable by (judge, metric, report); summary and manifest."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from lifesearch_local.errors import LifesearchError
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.llm.prompts import load_template
from lifesearch_local.records import Report, Task
from lifesearch_local.reporteval.aggregate import summarize
from lifesearch_local.reporteval.config import ReportEvalConfig
from lifesearch_local.reporteval.factuality import cited_sources, judge_factuality
from lifesearch_local.reporteval.items import ReportItem
from lifesearch_local.reporteval.quality import judge_quality
from lifesearch_local.reporteval.records import ReportEvaluation
from lifesearch_local.reporteval.redundancy import judge_redundancy
from lifesearch_local.reporteval.sources import fetch_sources
from lifesearch_local.rundir.directory import REPORTEVAL, REPORTEVAL_SUMMARY, RunDir
from lifesearch_local.rundir.files import write_atomic
from lifesearch_local.rundir.manifest import resume_config, sha256_bytes
from lifesearch_local.runtime.progress import progress_bar
from lifesearch_local.runtime.skeleton import OpenModel, open_stage
from lifesearch_local.web.config import WebConfig
from serving import Engine, RayConfig, Stopped

RECORDS, SUMMARY = REPORTEVAL, REPORTEVAL_SUMMARY  # the names other modules import
PROMPTS = ("reporteval_quality", "reporteval_quality_all", "reporteval_quality_one", "reporteval_redundancy",
           "reporteval_factuality")
NO_QUESTION = "(the research request was not provided; judge the report on its own terms)"


def report_items(reports: Sequence[Report], tasks: Sequence[Task] | None = None) -> list[ReportItem]:
    """Reports with their task's question and cutoff; without tasks, no question and no cutoff."""
    if tasks is None:
        return [ReportItem(r, NO_QUESTION) for r in reports]
    by_id = {t.id: t for t in tasks}
    unknown = sorted({r.task_id for r in reports} - by_id.keys())
    if unknown:
        raise LifesearchError(f"reports for tasks not in the tasks file: {', '.join(unknown[:5])}")
    return [ReportItem(r, by_id[r.task_id].question, by_id[r.task_id].as_of) for r in reports]


def decisions(rec: ReportEvaluation) -> int:
    """Graded judge decisions in a record (dimensions, pairs, claim–source pairs)."""
    if rec.quality:
        return sum(d.score is not None for d in rec.quality.dimensions)
    if rec.redundancy:
        return sum(p.score is not None for p in rec.redundancy.pairs)
    return rec.factuality.stats.judged if rec.factuality else 0


def _evaluate(metric: str, backend: Engine, cfg: JudgeConfig, rcfg: ReportEvalConfig,
              batch: Sequence[ReportItem], sources: dict) -> list[ReportEvaluation]:
    if metric == "quality":
        return judge_quality(backend, cfg, rcfg, batch)
    if metric == "redundancy":
        return judge_redundancy(backend, cfg, rcfg, batch)
    return judge_factuality(backend, cfg, batch, sources)


def _hash(obj: Any) -> str:
    return sha256_bytes(json.dumps(obj, sort_keys=True, default=str).encode())


def _run_metric(rd: RunDir, metric: str, todo: Sequence[ReportItem], backend: Engine, cfg: JudgeConfig,
                rcfg: ReportEvalConfig, web: WebConfig, stop: Any, show: bool, stamp: str) -> dict[str, Any]:
    """Evaluate one metric over the pending reports, a batch at a time; returns its stats."""
    t0, st = time.perf_counter(), {"reports": 0, "decisions": 0, "stopped_early": False}
    sources: dict = {}
    if metric == "factuality":
        sources, st["fetch"] = fetch_sources(web, cited_sources(todo), rcfg.chunk_budget(cfg.model.max_model_len), show=show)
        st["sources"], st["sources_unavailable"] = len(sources), sum(s.failure is not None for s in sources.values())
    with progress_bar(len(todo), desc=f"reporteval {metric}", unit="report", show=show) as bar:
        for i in range(0, len(todo), cfg.groups_per_call):
            try:
                recs = _evaluate(metric, backend, cfg, rcfg, todo[i : i + cfg.groups_per_call], sources)
            except Stopped:  # a long prefill gave up on SIGTERM: this batch is redone on rerun
                st["stopped_early"] = True
                break
            recs = [r.model_copy(update={"settings": stamp}) for r in recs]
            rd.append(RECORDS, recs)
            st["reports"] += len(recs)
            st["decisions"] += sum(decisions(r) for r in recs)
            bar.advance(len(recs))
            if stop:
                st["stopped_early"] = True
                break
    st["wall_s"] = round(time.perf_counter() - t0, 3)
    return st


def reporteval_stage(
    rd: RunDir, items: Sequence[ReportItem], cfg: JudgeConfig, rcfg: ReportEvalConfig, web: WebConfig,
    backend: Engine | None = None, *, ray: RayConfig | None = None, show: bool = True, force_config: bool = False,
    open_model: OpenModel | None = None,
) -> dict[str, Any]:
    """Evaluate every (metric, report) not yet in reporteval.jsonl; returns stats and this judge's summary.

    Holds the run directory's lock; a judge id with records made under other judge or
    ReportEval settings is refused (ConfigChanged) unless `force_config`. The model is opened
    only if something is left to do. SIGTERM stops after the current batch (records flushed);
    rerunning the same command finishes the work.
    """
    # `metrics` only picks which records to add; the others decide what every record says.
    settings = {"judge": resume_config(cfg), "reporteval": resume_config(rcfg.model_copy(update={"metrics": []}))}
    config_digest = _hash([cfg.model_dump(), rcfg.model_dump()])
    name = f"reporteval/{cfg.id}"
    with open_stage(rd, name, command="reporteval", settings=settings,
                    recorded=lambda: {r.key: r.settings for r in rd.load(RECORDS, ReportEvaluation)},
                    resuming=lambda done: any(k[0] == cfg.id for k in done),
                    force=force_config, model=cfg.model, ray=ray, engine=backend, open_model=open_model,
                    stamps=lambda done: Counter(h for (jid, *_), h in done.items() if jid == cfg.id)) as st:
        stats: dict[str, Any] = {"mode": cfg.mode, "model": cfg.model.model, "backend": cfg.model.backend,
                                 "web_mode": web.mode, "stopped_early": False}
        for metric in rcfg.metrics:
            todo = [it for it in items if (cfg.id, metric, *it.report.key) not in st.recorded]
            if todo:
                stats[metric] = _run_metric(rd, metric, todo, st.engine, cfg, rcfg, web, st.stop, show, st.stamp)
                if stats[metric].pop("stopped_early"):
                    stats["stopped_early"] = True
                    break
        st.close_engine()
        stats["wall_s"] = st.wall()
        summary = summarize(rd.load(RECORDS, ReportEvaluation))
        write_atomic(rd.file(SUMMARY), json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
        st.record(stats, hashes={**{f"prompts/{p}": load_template(p)[1] for p in PROMPTS},
                                 f"config/reporteval/{cfg.id}": config_digest},
                  seeds={"reporteval/redundancy": rcfg.seed}, model_key=cfg.id)
    return {"stats": stats, "summary": summary.get(cfg.id, {})}
