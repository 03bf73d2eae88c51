"""`lifesearch bench …`: benchmarks that print inputs, baseline, result and ratio from one run."""

from __future__ import annotations

import argparse
import importlib

BENCHES: dict[str, str] = {
    "judge": "lifesearch_local.cli.bench_judge:register",
    "fetch": "lifesearch_local.web.bench:register",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="performance benchmarks", description="Performance benchmarks.")
    bsub = p.add_subparsers(dest="bench", metavar="BENCH")
    for target in BENCHES.values():
        module, attr = target.split(":")
        getattr(importlib.import_module(module), attr)(bsub)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
