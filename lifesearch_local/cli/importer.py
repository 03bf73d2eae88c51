"""`lifesearch import`: convert other benchmarks' tasks and reports into LifeSearch files."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="convert another benchmark's tasks/reports (drb)",
        description="Convert another benchmark's tasks (and reports) into LifeSearch files that "
        "`validate`, `judge` and `score` read. See docs/import.md.",
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    d = kinds.add_parser(
        "drb",
        help="DeepResearch Bench: query.jsonl + criteria.jsonl (+ reports)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Convert DeepResearch Bench tasks into DIR/tasks.jsonl: each DRB criterion becomes "
        "one Pass/Fail rubric\n(EN: 'Requirement: {criterion}. Pass only if the answer to this check is "
        "yes: {explanation}', ZH likewise)\nwith weight w = max(0.1, round_half_up(e / max_e, 1)), "
        "e = dimension_weight × criterion weight,\nmax_e the task's largest e. Also writes "
        "DIR/drb_source.jsonl (every original value, so the DRB records can be\nrebuilt exactly), "
        "DIR/import.json (rules, domain map, counts, the worst-case score deviation that\nrounding "
        "causes per task) and, with --reports, DIR/reports.jsonl. The directory is written to a temp\n"
        "folder and renamed into place; a non-empty DIR is refused unless --force.",
    )
    d.add_argument("--queries", metavar="FILE", required=True, help="DRB query.jsonl (id, topic, language, prompt)")
    d.add_argument("--criteria", metavar="FILE", required=True, help="DRB criteria.jsonl (id, prompt, dimension_weight, criterions)")
    d.add_argument("--reports", metavar="FILE", help="DRB reports-<agent>.jsonl (id, prompt, article): one report per line")
    d.add_argument("--agent", metavar="NAME", help="agent name of the reports (default: <agent> from reports-<agent>.jsonl)")
    d.add_argument("--domain-map", metavar="FILE", help="YAML/JSON `topic: domain` entries overriding the default DRB topic → "
                   "domain map (docs/import.md); domains as `lifesearch validate` accepts them")
    d.add_argument("--id-prefix", metavar="PREFIX", default="drb-", help="prefix of our task ids (default drb-: DRB id 7 → drb-7)")
    d.add_argument("--out", metavar="DIR", required=True, help="output directory (created; must be empty unless --force)")
    d.add_argument("--force", action="store_true", help="replace a non-empty output directory")
    d.set_defaults(func=run_drb)


def run_drb(args: argparse.Namespace) -> int:
    from ..importers.drb import import_drb, summary, write_import

    result = import_drb(args.queries, args.criteria, args.reports, agent=args.agent,
                        domain_map=args.domain_map, prefix=args.id_prefix)
    out = write_import(result, args.out, force=args.force)
    info = summary(result)
    counts, dev = info["counts"], info["rounding_deviation"]
    langs = ", ".join(f"{k} {v}" for k, v in sorted(counts["languages"].items()))
    agent = f", {counts['reports']} reports of agent {result.inputs['agent']}" if result.reports else ""
    print(f"imported {counts['tasks']} tasks ({langs}), {counts['rubrics']} rubrics{agent} -> {out}")
    print("weights: " + ", ".join(f"{w} x{n}" for w, n in counts["weights"].items()))
    print(f"rounding deviation of a task score (worst case over pass/fail patterns): "
          f"max {dev['max']:.4f} ({dev['max_task']}), mean {dev['mean']:.4f}")
    return 0
