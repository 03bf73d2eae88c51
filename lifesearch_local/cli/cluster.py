"""`lifesearch cluster`: helpers for Slurm scripts (wait for Ray nodes, show resources)."""

from __future__ import annotations

import argparse


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


def wait(args: argparse.Namespace) -> int:
    from serving.ray.session import wait_for_nodes

    from ..errors import LifesearchError

    n = wait_for_nodes(args.address, args.nodes, args.timeout)
    if n < args.nodes:
        raise LifesearchError(f"only {n} of {args.nodes} Ray nodes joined within {args.timeout:.0f} s")
    print(f"{n} Ray nodes alive")
    return 0


def info(args: argparse.Namespace) -> int:
    from serving.ray.session import node_resources

    for address, resources in node_resources(args.address):
        print(f"{address}: {resources}")
    return 0
