"""`lifesearch bench fetch`: sequential vs concurrent fetching vs replay, against a loopback server with latency."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fetch",
        help="web fetcher: sequential vs concurrent vs replay",
        description="Serve N generated pages on loopback with an artificial latency (in a child process), then "
        "fetch them all three ways in one run: one at a time, with the concurrent fetcher (recording into a "
        "fresh cache), and in replay mode from that cache. Prints pages/s, the latency-bound ideal and the ratios.",
    )
    p.add_argument("--pages", type=int, default=100, help="pages to fetch (default 100)")
    p.add_argument("--latency-ms", type=float, default=100.0, help="server delay before each response (default 100)")
    p.add_argument("--concurrency", type=int, default=16, help="fetches in flight for the concurrent run (default 16)")
    p.add_argument("--page-kb", type=int, default=8, help="approximate size of each page in KB (default 8)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lifesearch_local.bench.fetch import format_report, run_bench, summarize
    from lifesearch_local.errors import LifesearchError

    if args.pages < 1 or args.concurrency < 1 or args.latency_ms < 0:
        raise LifesearchError("--pages and --concurrency must be positive, --latency-ms not negative")
    timings = run_bench(args)
    report = summarize(args, timings)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0
