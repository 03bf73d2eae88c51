"""`lifesearch cluster`: helpers for Slurm scripts (wait for Ray nodes, show resources)."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="Ray cluster helpers for batch scripts",
                       description="Ray cluster helpers used by slurm/*.sbatch.")
    csub = p.add_subparsers(dest="cluster_cmd", metavar="CMD")
    w = csub.add_parser("wait", help="wait until N nodes have joined",
                        description="Connect to the Ray cluster and wait (bounded) until at least N nodes are alive. "
                                    "SIGTERM ends the wait at once (exit 143).")
    w.add_argument("--nodes", type=int, required=True, help="nodes expected")
    w.add_argument("--timeout", type=float, default=600.0, help="seconds before giving up (exit 2)")
    w.add_argument("--address", default="auto", help="Ray address (default: auto, i.e. RAY_ADDRESS)")
    w.add_argument("--head-pid", type=int, help="process hosting the Ray head (e.g. its srun): fail at once if it exits")
    w.add_argument("--head-log", help="where that process logs (named in the error)")
    w.add_argument("--head-name", default="Ray head", help="what to call it in the error (e.g. 'Ray head on node01')")
    w.add_argument("--node", action="append", default=[], metavar="PID:NAME:LOG",
                   help="another node's process (e.g. a worker's srun), its name and log: fail at once if it exits")
    w.set_defaults(func=wait)
    i = csub.add_parser("info", help="print the cluster's nodes and resources")
    i.add_argument("--address", default="auto")
    i.set_defaults(func=info)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def wait(args: argparse.Namespace) -> int:
    from lifesearch_local.errors import LifesearchError
    from serving import ClusterGone, wait_for_nodes

    # A batch script stopping (preemption) must not wait for Ray's connection attempts: the main
    # thread only sleeps in short steps, so this runs at once and skips Ray's exit handlers.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    watched = [(args.head_pid, args.head_log, args.head_name)] if args.head_pid else []
    for spec in args.node:
        pid, name, log = (spec.split(":", 2) + ["", ""])[:3]
        if not pid.isdigit():
            raise LifesearchError(f"--node {spec!r}: expected PID:NAME:LOG")
        watched.append((int(pid), log or None, name or f"Ray node (pid {pid})"))

    def gone() -> str | None:
        return next((why for why in (head_gone(*w) for w in watched) if why), None)

    try:
        n = wait_for_nodes(args.address, args.nodes, args.timeout, gone=gone)
    except ClusterGone as e:
        raise LifesearchError(str(e)) from None
    except (ConnectionError, RuntimeError) as e:  # Ray could not reach the cluster at all
        first = next((ln for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        raise LifesearchError(f"could not join the Ray cluster at {args.address}: {first[:300]}") from None
    if n < args.nodes:
        raise LifesearchError(f"only {n} of {args.nodes} Ray nodes joined within {args.timeout:.0f} s")
    print(f"{n} Ray nodes alive")
    return 0


def head_gone(pid: int, log: str | None, name: str) -> str | None:
    """Why waiting is pointless: the process `pid` hosting a node (the head) exited (or is a
    zombie); None while it runs."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        state = "gone"
    if state not in ("gone", "Z", "X"):
        return None
    where = f"; its log: {log}" if log else ""
    last = last_line(Path(log)) if log else ""
    return f"{name} (pid {pid}) exited before the cluster came up" + (f": {last}" if last else "") + where


def last_line(path: Path, limit: int = 200) -> str:
    """The last line of `path` that says something (Ray's error, usually), shortened."""
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines()[-50:] if ln.strip()]
    except OSError:
        return ""
    lines = [ln for ln in lines if not ln.startswith(("srun:", "slurmstepd:", "ray-node:"))] or lines
    return lines[-1][:limit] if lines else ""


def info(args: argparse.Namespace) -> int:
    from serving import node_resources

    for address, resources in node_resources(args.address):
        print(f"{address}: {resources}")
    return 0
