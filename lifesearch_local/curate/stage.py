"""The curation run: stages 1–3 chunk by chunk, one record per query appended, resumable, draft tasks out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from lifesearch_local.curate.config import CurateConfig
from lifesearch_local.curate.parse import (
    filter_decision,
    is_empty_answer,
    parse_domain_answer,
    parse_filter,
    parse_rewrite,
)
from lifesearch_local.curate.records import CurationRecord, Query, ReasonCode, StageName
from lifesearch_local.llm.generate import generate_attempts
from lifesearch_local.llm.prompts import load_template, render
from lifesearch_local.records import Task
from lifesearch_local.rundir.directory import CURATION, RunDir
from lifesearch_local.rundir.jsonl import write_records
from lifesearch_local.rundir.manifest import config_hash, resume_config
from lifesearch_local.runtime.progress import progress_bar
from lifesearch_local.runtime.skeleton import OpenModel, Stage, open_stage
from serving import Engine

RECORDS = CURATION  # the name other modules import
DRAFTS = "tasks.draft.jsonl"
TEMPLATES = ("curate_filter", "curate_domain_en", "curate_domain_zh", "curate_rewrite")
# Seed offsets per stage, so a retry at one stage never replays another stage's sampling.
STAGE_SEEDS: dict[StageName, int] = {"filter": 0, "domain": 100, "rewrite": 200}


def _prompt(stage: StageName, rec: CurationRecord) -> tuple[str, str, str]:
    """(template name, rendered prompt, template hash) of `stage` for a query."""
    if stage == "filter":
        name, values = "curate_filter", {"query": rec.query}
    elif stage == "domain":
        name, values = f"curate_domain_{rec.language}", {"query": rec.query}
    else:
        name, values = "curate_rewrite", {"user_query": rec.query}
    text, digest = render(name, **values)
    return name, text, digest


def _ask(
    backend: Engine, cfg: CurateConfig, stage: StageName, recs: Sequence[CurationRecord],
    parser: Callable[[CurationRecord], Callable[[str], Any]],
) -> list[tuple[CurationRecord, Any]]:
    """Run one stage on `recs` with bounded retries; a query with no valid answer is marked failed.

    Returns the (record, parsed answer) pairs that got a valid answer.
    """
    if not recs:
        return []
    prompts = [_prompt(stage, r) for r in recs]
    results = generate_attempts(
        backend, cfg, [text for _, text, _ in prompts], [parser(r) for r in recs],
        max_tokens=getattr(cfg.max_tokens, stage), seed=STAGE_SEEDS[stage], reject_truncated=True,
    )
    ok = []
    for rec, (name, _, digest), (value, raws) in zip(recs, prompts, results):
        rec.prompts[name] = digest
        rec.raw[stage] = raws
        rec.stage = stage
        if value is None:
            rec.status, rec.code = "failed", "no_valid_answer"
            rec.reason = f"no valid {stage} answer after {len(raws)} attempt{'s' if len(raws) != 1 else ''}"
        else:
            ok.append((rec, value))
    return ok


def _drop(rec: CurationRecord, code: ReasonCode, reason: str) -> None:
    rec.status, rec.code, rec.reason = "dropped", code, reason


def curate_chunk(backend: Engine, cfg: CurateConfig, chunk: Sequence[Query]) -> list[CurationRecord]:
    """Stage 1 on every query of the chunk, stage 2 on those kept, stage 3 on those still kept."""
    recs = [CurationRecord(id=q.id, language=q.language, query=q.text, status="kept", stage="filter",
                           code="kept", reason="kept", model=cfg.model.model) for q in chunk]
    classify = []
    for rec, result in _ask(backend, cfg, "filter", recs, lambda r: parse_filter):
        rec.filter = result
        why = filter_decision(result, cfg.min_quality)
        if why:
            _drop(rec, *why)
        else:
            classify.append(rec)
    rewrite = []
    for rec, result in _ask(backend, cfg, "domain", classify, lambda r: parse_domain_answer):
        rec.classification = result
        rewrite.append(rec)
    by_id = {q.id: q for q in chunk}

    def rewrite_parser(rec: CurationRecord) -> Callable[[str], str | None]:
        return lambda text: parse_rewrite(text, by_id[rec.id], cfg.rewrite_max_growth)

    for rec, text in _ask(backend, cfg, "rewrite", rewrite, rewrite_parser):
        rec.rewritten = text
        if text != rec.query.strip():
            rec.reason = "kept: operations or file dependencies removed by the rewrite"
    for rec in rewrite:  # the paper's "return an empty string", given on every attempt
        raws = rec.raw.get("rewrite", [])
        if rec.status == "failed" and raws and all(is_empty_answer(t) for t in raws):
            rec.rewritten = ""
            _drop(rec, "only_engineering_operations",
                  f"only engineering operations (an empty rewrite on all {len(raws)} attempts)")
    return recs


def draft_tasks(records: Sequence[CurationRecord]) -> list[dict[str, Any]]:
    """The kept queries as tasks in our schema, rubrics still to be written by experts."""
    out = []
    for r in records:
        if r.status != "kept" or r.classification is None or not r.rewritten:
            continue
        task = Task(id=r.id, language=r.language, domain=r.classification.domain, question=r.rewritten, rubrics=[])
        out.append(task.model_dump(mode="json", exclude_none=True))
    return out


def curate_stage(
    rd: RunDir, queries: Sequence[Query], cfg: CurateConfig, backend: Engine | None = None, *,
    show: bool = True, force_config: bool = False, open_model: OpenModel | None = None,
) -> dict[str, Any]:
    """Curate every query not yet in curation.jsonl, chunk by chunk; then rewrite tasks.draft.jsonl
    from all records and record the run in the manifest. Returns this invocation's stats.

    Holds the run directory's lock; records made under other settings are not added to
    (ConfigChanged) unless `force_config`. The model is loaded only if something is left to do.
    SIGTERM stops after the current chunk (records flushed); rerunning the same command finishes
    the work.
    """
    with open_stage(rd, "curate", command="curate", settings=resume_config(cfg),
                    recorded=lambda: rd.load(RECORDS, CurationRecord), resuming=bool,
                    force=force_config, model=cfg.model,
                    engine=backend, open_model=open_model, honour_stop=False) as st:
        records = st.recorded  # extended with each chunk, never read again
        done = {r.id for r in records}
        todo = [q for q in queries if q.id not in done]
        new, stopped = _curate_all(st, cfg, todo, records, show)
        st.close_engine()
        write_records(rd.file(DRAFTS), draft_tasks(records))
        stats = {"queries": len(queries), "already_recorded": len(done), "curated": new,
                 "wall_s": st.wall(), "stopped_early": stopped,
                 "backend": cfg.model.backend, "model": cfg.model.model, **summarize_records(records)}
        stats.update({k: v for k, v in st.engine.stats().items() if v})
        st.record(stats, hashes={"config/curate": config_hash(cfg),
                                 **{f"prompts/{name}": load_template(name)[1] for name in TEMPLATES}},
                  seeds={"curate": cfg.model.seed}, model_key="curate", curate_config=cfg.model_dump(mode="json"))
    return stats


def _curate_all(st: Stage, cfg: CurateConfig, todo: Sequence[Query], records: list[CurationRecord],
                show: bool) -> tuple[int, bool]:
    """The pending queries, a chunk at a time, each chunk appended as it is done: (curated, stopped)."""
    new = 0
    with progress_bar(len(todo), desc="curate", unit="query", show=show) as bar:
        for i in range(0, len(todo), cfg.batch_size):
            chunk = todo[i : i + cfg.batch_size]
            curated = curate_chunk(st.engine, cfg, chunk)
            st.rd.append(RECORDS, curated)
            records.extend(curated)
            new += len(chunk)
            bar.advance(len(chunk))
            if st.stop and i + cfg.batch_size < len(todo):
                return new, True
    return new, False


def summarize_records(records: Sequence[CurationRecord]) -> dict[str, Any]:
    """Counts over all records: by status, drop reason, failing stage, kept domain and language."""
    def count(items) -> dict[str, int]:
        return dict(sorted(Counter(items).items()))

    return {
        "records": len(records),
        "kept": sum(r.status == "kept" for r in records),
        "dropped": sum(r.status == "dropped" for r in records),
        "failed": sum(r.status == "failed" for r in records),
        "dropped_by_reason": count(r.code for r in records if r.status == "dropped"),
        "failed_by_stage": count(r.stage for r in records if r.status == "failed"),
        "kept_by_domain": count(r.classification.domain.value for r in records if r.status == "kept" and r.classification),
        "kept_by_language": count(r.language for r in records if r.status == "kept"),
    }
