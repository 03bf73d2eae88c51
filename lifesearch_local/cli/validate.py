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
    p.add_argument("tasks", help="tasks JSONL (LifeSearch schema; see data/README.md)")
    p.add_argument("--draft", action="store_true",
                   help="draft mode: tasks without rubrics (missing or empty `rubrics`) are valid, e.g. the "
                   "tasks.draft.jsonl written by `lifesearch curate` before experts write the rubrics; "
                   "rubrics that are present are checked as usual")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..tasks import load_tasks, summarize

    tasks = load_tasks(args.tasks, draft=args.draft)
    if args.draft:
        bare = sum(1 for t in tasks if not t.rubrics)
        print(f"{args.tasks}: ok (draft): {summarize(tasks)}; {bare} without rubrics")
    else:
        print(f"{args.tasks}: ok: {summarize(tasks)}")
    return 0
