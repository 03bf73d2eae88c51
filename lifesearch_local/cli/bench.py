"""`lifesearch bench …`: benchmarks that print inputs, baseline, result and ratio from one run."""

from __future__ import annotations

import argparse

from lifesearch_local.cli import bench_fetch as fetch_bench
from lifesearch_local.cli import bench_judge

BENCHES = {"judge": bench_judge.register, "fetch": fetch_bench.register}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="performance benchmarks", description="Performance benchmarks.")
    bsub = p.add_subparsers(dest="bench", metavar="BENCH")
    for register_bench in BENCHES.values():
        register_bench(bsub)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
