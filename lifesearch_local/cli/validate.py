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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..tasks import load_tasks, summarize

    tasks = load_tasks(args.tasks)
    print(f"{args.tasks}: ok: {summarize(tasks)}")
    return 0
