"""`lifesearch curate`: the paper's task-curation stages 1–3 on query seeds with a local model (resumable)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lifesearch_local.cli.common import add_device, add_force_config, add_quiet

DESCRIPTION = """\
Turn raw query seeds into draft LifeSearch tasks with a local model, following the paper's
section 3.1 and its prompts (App. B.1-B.3):

  stage 1  intent & quality filtering (prompts/curate_filter.txt): drops queries of low quality
           (below --min-quality), unrelated to search, or presupposing an unspecified recent event;
  stage 2  domain discovery (prompts/curate_domain_en.txt / curate_domain_zh.txt by query
           language): one of the seven domains;
  stage 3  task rewriting (prompts/curate_rewrite.txt): removes file, tool, script and delivery
           operations, keeping the research request and its language; a rewrite empty on
           every attempt ("only engineering operations") drops the query.

Stage 4 of the paper (manual selection) and the rubrics are the experts' work. Stage 1 runs on
every query of a chunk, stage 2 on those kept, stage 3 on those still kept. An invalid answer
(not the paper's JSON; a rewrite that is empty, in the other language or much longer than the
query; any answer cut off at max_tokens) is retried
with a new seed (bounded by `retries`); a query that never gets a valid answer is recorded as
failed at that stage with every raw output. Writes DIR/curation.jsonl (one record per query:
kept / dropped / failed, the reason, each stage's answer, raw outputs, prompt hashes),
DIR/tasks.draft.jsonl (the kept queries as tasks with `rubrics: []`; check it with
`lifesearch validate --draft`) and DIR/manifest.json. Rerunning the same command skips the
queries already recorded."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("curate", help="filter, classify and rewrite query seeds into draft tasks",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queries", required=True,
                   help="queries JSONL: id (or qid), query (or prompt/question/text), optional language en|zh "
                   "(detected from CJK characters when absent)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="YAML with a `curate:` block (or a bare one); see configs/curate_tiny.yaml")
    src.add_argument("--model", help="model: tiny-llama|tiny-qwen2|tiny-qwen3|tiny-mistral (random), smollm2-135m (real, needs the `real` extra), a local path or hub id")
    p.add_argument("--out", required=True, help="output directory (created; reused to resume)")
    p.add_argument("--retries", type=int, help="extra attempts after an invalid answer (default 2)")
    p.add_argument("--max-tokens", type=int, help="cap every stage's answer at this many tokens (quick CPU runs)")
    p.add_argument("--min-quality", choices=["high", "medium", "low"], help="lowest quality kept (default medium)")
    p.add_argument("--batch-size", type=int, help="queries per chunk appended to curation.jsonl (default 32)")
    add_device(p)
    p.add_argument("--json", action="store_true", help="print the stats as JSON")
    add_force_config(p, "curation records")
    add_quiet(p)
    p.set_defaults(func=run)


def curate_config(args: argparse.Namespace):
    """The CurateConfig of this command: the YAML or --model, with the flags over it."""
    from lifesearch_local.configfile import validate_config
    from lifesearch_local.curate.config import CurateConfig, load_curate_config
    from serving import model_config

    cfg = load_curate_config(args.config) if args.config else CurateConfig(model=model_config(model=args.model))
    data = cfg.model_dump()
    if args.device:
        data["model"]["device"] = args.device
    if args.max_tokens is not None:
        data["max_tokens"] = {stage: min(n, args.max_tokens) for stage, n in data["max_tokens"].items()}
    for key in ("retries", "min_quality", "batch_size"):
        if getattr(args, key) is not None:
            data[key] = getattr(args, key)
    return validate_config(CurateConfig, data, args.config or "flags")


def print_summary(stats: dict[str, Any], rd) -> None:
    """What this run did and what the directory now holds: counts by status, reason, stage and domain."""
    from lifesearch_local.curate.stage import DRAFTS, RECORDS

    def fmt(counts: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"

    # `curated` counts queries answered now, whatever the outcome: say so, and what came of them.
    print(f"curate {stats['model']}: {stats['queries']} queries, {stats['already_recorded']} already recorded, "
          f"{stats['curated']} processed now in {stats['wall_s']} s -> {rd.file(RECORDS)}")
    print(f"  kept {stats['kept']}, dropped {stats['dropped']}, failed {stats['failed']} (of {stats['records']} records)")
    if stats["records"] and stats["failed"] == stats["records"]:
        print(f"  every query failed: the model never gave a valid answer (raw outputs in {rd.file(RECORDS)}); "
              "a tiny random-weight model always fails, use a real instruct model")
    print(f"  dropped by reason: {fmt(stats['dropped_by_reason'])}")
    print(f"  failed by stage:   {fmt(stats['failed_by_stage'])}")
    print(f"  kept by domain:    {fmt(stats['kept_by_domain'])}")
    print(f"  kept by language:  {fmt(stats['kept_by_language'])}")
    check = f"check: lifesearch validate --draft {rd.file(DRAFTS)}" if stats["kept"] else "no query kept, the file is empty"
    print(f"draft tasks: {stats['kept']} -> {rd.file(DRAFTS)} ({check})")


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.curate.queries import load_queries
    from lifesearch_local.curate.stage import curate_stage
    from lifesearch_local.run.preflight import preflight
    from lifesearch_local.rundir.directory import RunDir
    from lifesearch_local.rundir.manifest import sha256_file

    queries = load_queries(args.queries)
    cfg = curate_config(args)
    preflight([("curate", cfg.model)])  # before the output directory exists
    rd = RunDir(args.out)
    with rd.locked("curate"):
        rd.update_manifest(hashes={"queries": sha256_file(args.queries)})
        if cfg.model.model.startswith("tiny-") and not args.json:
            print(f"note: {cfg.model.model} has RANDOM weights (built locally for offline runs): expect invalid "
                  "answers, recorded as failed")
        stats = curate_stage(rd, queries, cfg, show=not (args.quiet or args.json), force_config=args.force_config)
    if args.json:
        print(json.dumps(stats, indent=2, ensure_ascii=False))
    else:
        print_summary(stats, rd)
    if stats["stopped_early"]:
        print("stopped by signal; rerun the same command to finish")
    return 0
