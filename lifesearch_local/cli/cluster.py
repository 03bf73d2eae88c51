"""`lifesearch cluster`: helpers for Slurm scripts (wait for Ray nodes, show resources)."""

from __future__ import annotations

import argparse
import time


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="Ray cluster helpers for batch scripts",
                       description="Ray cluster helpers used by slurm/*.sbatch.")
    csub = p.add_subparsers(dest="cluster_cmd", metavar="CMD")
    w = csub.add_parser("wait", help="wait until N nodes have joined",
                        description="Connect to the Ray cluster and wait (bounded) until at least N nodes are alive.")
    w.add_argument("--nodes", type=int, required=True, help="nodes expected")
    w.add_argument("--timeout", type=float, default=600.0, help="seconds before giving up (exit 2)")
    w.add_argument("--address", default="auto", help="Ray address (default: auto, i.e. RAY_ADDRESS)")
    w.set_defaults(func=wait)
    i = csub.add_parser("info", help="print the cluster's nodes and resources")
    i.add_argument("--address", default="auto")
    i.set_defaults(func=info)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def alive_nodes() -> list[dict]:
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


def wait(args: argparse.Namespace) -> int:
    import ray

    from ..errors import LifesearchError

    ray.init(address=args.address, logging_level="ERROR", log_to_driver=False)
    deadline = time.monotonic() + args.timeout
    n = len(alive_nodes())
    while n < args.nodes and time.monotonic() < deadline:  # bounded by the deadline
        time.sleep(2.0)
        n = len(alive_nodes())
    ray.shutdown()
    if n < args.nodes:
        raise LifesearchError(f"only {n} of {args.nodes} Ray nodes joined within {args.timeout:.0f} s")
    print(f"{n} Ray nodes alive")
    return 0


def info(args: argparse.Namespace) -> int:
    import ray

    ray.init(address=args.address, logging_level="ERROR", log_to_driver=False)
    for node in alive_nodes():
        res = {k: v for k, v in node["Resources"].items() if not k.startswith("node:")}
        print(f"{node['NodeManagerAddress']}: {res}")
    ray.shutdown()
    return 0
