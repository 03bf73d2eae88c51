#!/usr/bin/env python3
"""Measure the python tool's per-call limits: what a call leaves on the host's disk
and how much memory its processes hold together.

    python scripts/faults/sandbox_limits.py [--runs 3] [--mode both|namespaces|landlock]

Probe 1 nests 1,500 directories in the working directory, then writes 64 files of 16 MiB at the
deepest level: it prints the bytes the call left under its temporary directory and how many files
it wrote. Probe 2 forks 6 children at `memory_mb: 256`, each touching 200 MiB and holding it: it
prints how many held theirs, the call's exit, its record's `killed` event, and the peak RssAnon +
RssShmem of the call's processes (the runner's own included) sampled from outside every 5 ms.
Exit 0 when no byte is left behind and the call did not hold all 6 x 200 MiB.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from lifesearch_local.agent.config import PythonToolConfig
from lifesearch_local.agent.python_tool import run_snippet

NEST = """
import os
print(os.getcwd(), flush=True)
for i in range(1500):
    os.mkdir('d'); os.chdir('d')
for i in range(64):
    try:
        with open(f'f{i}', 'wb') as f:
            for _ in range(16):
                f.write(b'x' * (1 << 20))
    except OSError as e:
        print('stopped at file', i, 'errno', e.errno, flush=True); break
    print('wrote', i, flush=True)
"""

HOLD = """
import os, time
kids = []
for i in range(6):
    pid = os.fork()
    if pid == 0:
        try:
            block = bytearray(200 << 20)
            block[::4096] = b'x' * len(block[::4096])
            print('holds 200 MiB', flush=True)
            time.sleep(4)
        except MemoryError:
            print('MemoryError', flush=True)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
"""


def left_bytes(top: Path) -> int:
    """Bytes on disk under `top` (iterative, descriptor-relative: the tree may be deeper than PATH_MAX)."""
    if not top.exists():
        return 0
    total, stack = 0, [os.open(top, os.O_RDONLY | os.O_DIRECTORY)]
    while stack:
        fd = stack.pop()
        with os.scandir(fd) as entries:
            for e in entries:
                total += e.stat(follow_symlinks=False).st_blocks * 512
                if e.is_dir(follow_symlinks=False):
                    stack.append(os.open(e.name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd))
        os.close(fd)
    return total


def held_by_call(token: str) -> int:
    """RssAnon + RssShmem of every process whose command line holds `token` (the call's runner and
    everything it forked: they inherit its command line)."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if token.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(("RssAnon:", "RssShmem:")):
                    total += int(line.split()[1]) << 10
        except (OSError, ValueError):
            continue
    return total


def probe_leak(namespaces: bool) -> int:
    cfg = PythonToolConfig(wall_s=120, cpu_s=60)
    try:
        res = asyncio.run(run_snippet(NEST, cfg, namespaces=namespaces))
        outcome = f"exit {res.returncode}, {res.stdout.count('wrote')} files written, failure {res.failure(cfg)}"
        workdir = Path(res.stdout.partition("\n")[0])
    except RecursionError as e:  # the cleanup of a deep tree (before the fix)
        outcome, workdir = f"raised {type(e).__name__}", None
    base = workdir.parent if workdir else next(Path(tempfile.gettempdir()).glob("lifesearch-py-*"), None)
    left = left_bytes(base) if base else 0
    print(f"  leak: {outcome}; bytes left on the host: {left:,}")
    if base and base.exists():
        os.system(f"rm -rf '{base}'")  # what the harness could not remove
    return left


def probe_memory(namespaces: bool) -> bool:
    cfg = PythonToolConfig(wall_s=60, cpu_s=30, memory_mb=256)
    token, peak, stop = tempfile.gettempdir(), [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], held_by_call(token))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        res = asyncio.run(run_snippet(HOLD, cfg, namespaces=namespaces))
    finally:
        stop.set()
        sampler.join()
    held = res.stdout.count("holds")
    print(f"  memory: {held} of 6 children held 200 MiB; exit {res.returncode}; failure {res.failure(cfg)}; "
          f"killed {res.isolation.get('killed')}; peak held together {peak[0] / (1 << 20):.0f} MiB; "
          f"mechanism {res.isolation.get('memory')}")
    return held < 6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mode", choices=["both", "namespaces", "landlock"], default="both")
    args = ap.parse_args()
    # a temporary folder of this probe's own: its path in the runner's command line marks the call's processes
    tempfile.tempdir = tempfile.mkdtemp(prefix="sandbox-limits-")
    ok = True
    try:
        for mode in (["namespaces", "landlock"] if args.mode == "both" else [args.mode]):
            print(mode)
            for _ in range(args.runs):
                ok &= probe_leak(mode == "namespaces") == 0
                ok &= probe_memory(mode == "namespaces")
    finally:
        os.system(f"rm -rf '{tempfile.tempdir}'")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
