"""`lifesearch validate`: check a task file and summarise it."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="check a tasks JSONL file",
        description="Validate a tasks JSONL file. Exit 0 with a one-line summary, or exit 2 naming "
        "file:line: field of the first problem (malformed JSON, unknown domain or language, weight "
        "outside [0, 1], duplicate ids, zero total weight).",
    )
    p.add_argument("tasks", help="tasks JSONL (LifeSearch schema; see data/README.md), or another record file with --kind")
    p.add_argument("--kind", choices=["tasks", "reports", "judgments", "labels"], default="tasks",
                   help="what the file holds (default tasks): reports, judgments and labels files are checked "
                   "line by line against their record type")
    p.add_argument("--draft", action="store_true",
                   help="draft mode: tasks without rubrics (missing or empty `rubrics`) are valid, e.g. the "
                   "tasks.draft.jsonl written by `lifesearch curate` before experts write the rubrics; "
                   "rubrics that are present are checked as usual")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.tasks import load_tasks, summarize

    if args.kind != "tasks":
        return _validate_records(args.tasks, args.kind)
    _not_another_kind(args.tasks)
    tasks = load_tasks(args.tasks, draft=args.draft)
    if args.draft:
        bare = sum(1 for t in tasks if not t.rubrics)
        print(f"{args.tasks}: ok (draft): {summarize(tasks)}; {bare} without rubrics")
    else:
        print(f"{args.tasks}: ok: {summarize(tasks)}")
    return 0


def _validate_records(path: str, kind: str) -> int:
    from lifesearch_local.errors import InputError
    from lifesearch_local.records import Judgment, Label, Report
    from lifesearch_local.rundir.jsonl import read_records, require_file

    require_file(path)
    model = {"reports": Report, "judgments": Judgment, "labels": Label}[kind]
    records = read_records(path, model)
    if not records:
        raise InputError(path, None, None, f"no {kind} in file")
    print(f"{path}: ok: {len(records)} {kind}")
    return 0


# Fields that only a record of another kind has, in the order they are told apart.
_KINDS = (("judgments", {"rubric_id", "judge"}), ("labels", {"rubric_id", "satisfied"}), ("reports", {"task_id", "text"}))


def _not_another_kind(path: str) -> None:
    """A one-line error that suggests `--kind K` when the first record is plainly not a task."""
    from lifesearch_local.errors import InputError
    from lifesearch_local.rundir.jsonl import iter_json_lines, require_file

    require_file(path)
    try:
        lineno, obj = next(iter_json_lines(path))
    except (StopIteration, InputError):
        return  # load_tasks says what is wrong
    if "question" in obj or "rubrics" in obj:
        return
    for kind, fields in _KINDS:
        if fields <= obj.keys():
            raise InputError(path, lineno, None, f"this is a {kind[:-1]} ({', '.join(sorted(fields))}), not a task; "
                             f"check a {kind} file with `lifesearch validate --kind {kind} {path}`")
