"""`lifesearch repair`: keep every valid line of a run directory's records, set the rest aside."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "repair",
        help="drop damaged lines and duplicate records from a run directory",
        description="Check every stage file of a run directory (reports, judgments, reporteval, curation, "
        "labels), its trajectories and its manifest. A line that is not valid JSON or not a valid record, "
        "and every later record with the key of an earlier one (the first is kept, as a resume would), is "
        "taken out; the file is rewritten atomically and the dropped lines are appended to <file>.dropped "
        "with line number and reason. A manifest.json that does not load is renamed manifest.json.corrupt-* "
        "(the next run writes a new one, without the records of earlier configs). Rerun the stage afterwards "
        "to redo what was dropped. Takes the run directory's lock.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="run directory")
    p.add_argument("--dry-run", action="store_true", help="only report what would be dropped")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.run.repair import repair_run_dir

    if not Path(args.run_dir).is_dir():
        raise LifesearchError(f"{args.run_dir}: no such run directory")
    results = repair_run_dir(args.run_dir, dry_run=args.dry_run)
    verb = "would drop" if args.dry_run else "dropped"
    damaged = [r for r in results if r.dropped]
    for r in damaged:
        print(f"{r.name}: kept {r.kept}, {verb} {len(r.dropped)}"
              + (f" (renamed {r.set_aside})" if r.set_aside and not args.dry_run else ""))
        for d in r.dropped[:10]:
            print(f"  line {d.line}: {d.why}")
        if len(r.dropped) > 10:
            print(f"  … and {len(r.dropped) - 10} more" + ("" if args.dry_run else f" (all in {r.name}.dropped)"))
    checked = sum(1 for _ in results)
    if not damaged:
        print(f"{args.run_dir}: {checked} file(s) checked, nothing to repair")
    elif not args.dry_run:
        print(f"{args.run_dir}: repaired {len(damaged)} of {checked} file(s); rerun the stage to redo what was dropped")
    return 0
