"""`lifesearch import`: convert other benchmarks' tasks and reports into LifeSearch files."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="convert another benchmark's tasks/reports/labels (drb, drb2, reports, profbench)",
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
    register_drb2(kinds)
    register_reports(kinds)
    register_profbench(kinds)


def run_drb(args: argparse.Namespace) -> int:
    from lifesearch_local.importers.drb import import_drb, summary, write_import

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


def register_drb2(kinds: argparse._SubParsersAction) -> None:
    from lifesearch_local.cli.common import result_default
    from lifesearch_local.importers.config import Drb2ImportConfig

    d = kinds.add_parser(
        "drb2",
        help="DeepResearch Bench II: tasks_and_rubrics.jsonl (+ reports, + evaluator results as labels)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Convert DeepResearch Bench II into DIR/tasks.jsonl: each rubric verbatim, weight 1, its "
        "dimension\n(info_recall, analysis, presentation) kept on the rubric, the blocked article on the task. "
        "With\n--reports, DIR/reports.jsonl; with --results (the upstream run_evaluation.py output), "
        "DIR/labels.jsonl\n(first grading of each report; source = --judge-name) and DIR/judgments.jsonl "
        "(every grading,\njudge = --judge-name), for `lifesearch agree`. DIR/drb2_source.jsonl and "
        "DIR/drb2_results_source.jsonl\nkeep the rest, so the upstream lines can be rebuilt exactly. "
        "See docs/import.md.",
    )
    d.add_argument("--tasks", metavar="FILE", required=True, help="DRB II tasks_and_rubrics.jsonl")
    d.add_argument("--reports", "--reports-dir", metavar="PATH", nargs="+", help="a folder of idx-<n>.md|.txt|.html|.pdf|"
                   ".docx reports (agent = folder name; HTML, PDF and DOCX read as the web layer reads pages, what each "
                   "loses recorded in import.json), a folder of such folders (one agent each, the evaluator's layout), "
                   "or a JSONL of {idx, article}")
    d.add_argument("--skip-unreadable", action="store_true", help="import the reports that give text and record the "
                   "others (images, broken files) in import.json, instead of refusing them all")
    d.add_argument("--agent", metavar="NAME", help="agent name of a single --reports folder or file; must equal the "
                   "results' `model` for the labels to meet the reports")
    max_chars = result_default(Drb2ImportConfig, "max_chars")
    d.add_argument("--max-chars", metavar="N", type=int, default=max_chars, help="cut each report at N characters, as "
                   f"the evaluator does before grading (its MAX_PAPER_CHARS, default {max_chars}); 0 keeps it whole")
    d.add_argument("--results", metavar="FILE", nargs="+", help="results JSONL written by the upstream run_evaluation.py")
    d.add_argument("--judge-name", metavar="NAME", default="gemini", help="who graded the results: the labels' source and "
                   "the judgments' judge (default gemini; the evaluator does not write its model)")
    d.add_argument("--blocked-verdict", choices=("fail", "pass", "skip"), default="fail", help="what a -1 (met only through "
                   "a blocked source) becomes: fail = not satisfied, as the upstream aggregate_scores.py counts it "
                   "(default); pass = satisfied; skip = no label")
    d.add_argument("--question", choices=("prompt", "task"), default="prompt", help="the task's question: `prompt` (what "
                   "agents get: the task and the blocked article in words; default) or `content.task` (what the upstream judge reads)")
    d.add_argument("--domain-map", metavar="FILE", help="YAML/JSON `theme: domain` entries overriding the default map (DRB's)")
    d.add_argument("--id-prefix", metavar="PREFIX", default="drb2-", help="prefix of our task ids (default drb2-: idx 7 → drb2-7)")
    d.add_argument("--out", metavar="DIR", required=True, help="output directory (created; must be empty unless --force)")
    d.add_argument("--force", action="store_true", help="replace an earlier output of this command")
    d.set_defaults(func=run_drb2)


def run_drb2(args: argparse.Namespace) -> int:
    from lifesearch_local.importers.drb2 import import_drb2
    from lifesearch_local.importers.drb2_results import import_results, summary, write_drb2

    result = import_drb2(args.tasks, reports=args.reports, agent=args.agent, max_chars=args.max_chars or None,
                         domain_map=args.domain_map, prefix=args.id_prefix, question=args.question,
                         skip_unreadable=args.skip_unreadable)
    results = import_results(result, args.results, judge=args.judge_name, blocked=args.blocked_verdict) if args.results else None
    out = write_drb2(result, results, args.out, force=args.force)
    info = summary(result, results)
    c = info["counts"]
    langs = ", ".join(f"{k} {v}" for k, v in c["languages"].items())
    dims = ", ".join(f"{k} {v}" for k, v in c["dimensions"].items())
    print(f"imported {c['tasks']} tasks ({langs}), {c['rubrics']} rubrics ({dims}) -> {out}")
    if c["reports"]:
        cut = f"; {c['reports_cut']} cut at {args.max_chars} characters" if c["reports_cut"] else ""
        print("reports: " + ", ".join(f"{a} {n}" for a, n in c["reports"].items()) + cut)
        print_report_files(result.report_files, result.refused)
    if results is not None:
        r = info["results"]
        print(f"results: {r['lines']} graded lines ({r['failed_lines']} failed, {r['repeat_lines']} repeats) -> "
              f"{r['labels']} labels, {r['judgments']} judgments of {args.judge_name}; scores "
              + ", ".join(f"{k}: {v}" for k, v in r["scores"].items()) + f"; -1 -> {args.blocked_verdict}")
        if r["agents_without_reports"]:
            print(f"note: no reports for the graded system(s) {', '.join(r['agents_without_reports'])}: "
                  "name the reports' agent as the results' model (--agent)")
    return 0


def print_report_files(files: list, refused: list[str]) -> None:
    """What the report files lost on the way to text (a line per file that lost something), and those skipped."""
    from collections import Counter

    if not files and not refused:
        return
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(Counter(f.format for f in files).items()))
    print(f"report files: {len(files)} read ({kinds})" + (f", {len(refused)} unreadable skipped" if refused else ""))
    for f in files:
        if f.lost:
            print(f"  {Path(f.file).name} ({f.task_id}, {f.chars:,} characters): {'; '.join(f.lost)}")
    for line in refused:
        print(f"  skipped {line}")


def register_reports(kinds: argparse._SubParsersAction) -> None:
    d = kinds.add_parser(
        "reports",
        help="report files (idx-<n>.md|.txt|.html|.pdf|.docx, or <task id>.<ext>) of one agent",
        description="Read a folder of report files of one agent into DIR/reports.jsonl: markdown and text as UTF-8, "
        "HTML through trafilatura, PDF through the web layer's capped extractor, DOCX through a built-in reader. "
        "idx-<n>.<ext> answers task <prefix><n>; any other <name>.<ext> answers task <name>. What each file lost "
        "on the way to text (images, a PDF's layout, a page's chrome) is printed and recorded in DIR/import.json; "
        "a file that gives no text is refused in one line (--skip-unreadable imports the others).",
    )
    d.add_argument("--dir", metavar="DIR", required=True, help="folder of report files")
    d.add_argument("--agent", metavar="NAME", required=True, help="the agent that wrote them")
    d.add_argument("--tasks", metavar="FILE", help="tasks JSONL: refuse a report of a task it does not hold")
    d.add_argument("--id-prefix", metavar="PREFIX", default="", help="task id of idx-<n> files: PREFIX + n "
                   "(e.g. drb2- for `import drb2`'s tasks; default: none)")
    d.add_argument("--max-chars", metavar="N", type=int, default=0, help="cut each report at N characters (0: whole)")
    d.add_argument("--skip-unreadable", action="store_true", help="import the readable files, record the others")
    d.add_argument("--out", metavar="DIR", required=True, help="output directory (created; must be empty unless --force)")
    d.add_argument("--force", action="store_true", help="replace an earlier output of this command")
    d.set_defaults(func=run_reports)


def run_reports(args: argparse.Namespace) -> int:
    from lifesearch_local.importers.report_files import import_reports, write_reports_import
    from lifesearch_local.tasks import load_tasks

    known = {t.id for t in load_tasks(args.tasks)} if args.tasks else None
    result = import_reports(args.dir, args.agent, prefix=args.id_prefix, known=known, tasks_source=args.tasks,
                            max_chars=args.max_chars or None, skip_unreadable=args.skip_unreadable)
    out = write_reports_import(result, args.out, force=args.force)
    cut = f"; {result.cut_reports} cut at {args.max_chars} characters" if result.cut_reports else ""
    print(f"imported {len(result.reports)} reports of agent {args.agent}{cut} -> {out}")
    print_report_files(result.files, result.refused)
    return 0


def register_profbench(kinds: argparse._SubParsersAction) -> None:
    d = kinds.add_parser(
        "profbench",
        help="ProfBench: tasks, one report per graded system, human labels",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Convert ProfBench rows (JSONL, the fields of its official loader: task_id, domain, prompt,\n"
        "rubrics[criterion_description, criterion_weight, criterion_type, <system>_fulfilment],\n"
        "<system>_response) into DIR/tasks.jsonl, DIR/reports.jsonl (one report per system) and\n"
        "DIR/labels.jsonl (the human fulfilment labels, source human). Weights follow ProfBench's own\n"
        "score (Critical 4, Major 3, Minor 2, Additional 1) divided by 4: 1.0, 0.75, 0.5, 0.25.\n"
        "DIR/profbench_source.jsonl keeps the rest, so the rows can be rebuilt exactly. See docs/import.md.",
    )
    d.add_argument("file", metavar="FILE", help="ProfBench JSONL, one task per line (docs/import.md: how to get it)")
    d.add_argument("--domain-map", metavar="FILE", help="YAML/JSON `ProfBench domain: domain` entries overriding the default map")
    d.add_argument("--id-prefix", metavar="PREFIX", default="pb-", help="prefix of our task ids (default pb-: Chem-0 → pb-Chem-0)")
    d.add_argument("--out", metavar="DIR", required=True, help="output directory (created; must be empty unless --force)")
    d.add_argument("--force", action="store_true", help="replace an earlier output of this command")
    d.set_defaults(func=run_profbench)


def run_profbench(args: argparse.Namespace) -> int:
    from lifesearch_local.importers.profbench import import_profbench, summary, write_profbench

    result = import_profbench(args.file, domain_map=args.domain_map, prefix=args.id_prefix)
    out = write_profbench(result, args.out, force=args.force)
    c = summary(result)["counts"]
    print(f"imported {c['tasks']} tasks, {c['rubrics']} rubrics, {c['reports']} reports, {c['labels']} human labels -> {out}")
    print("levels: " + ", ".join(f"{k} x{v}" for k, v in c["levels"].items()) + "; labels satisfied: "
          + ", ".join(f"{a} {v['satisfied']}/{v['of']}" for a, v in c["labels_by_system"].items()))
    return 0
