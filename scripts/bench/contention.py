"""The contention table: the judge-kernel bench idle, beside one busy process, with spinning and with passive waits.

    PYTHONPATH=. python scripts/bench/contention.py [--repeats 5] [--baseline] [--python PY]

Runs `lifesearch bench judge --model tiny-mistral --prefix-tokens 3000 --rubrics 24 --baseline none` (the
judge-kernel bench) in a fresh process per row, so each row's OpenMP starts with that row's environment:
  idle            nothing else started; the command picks its own wait (spinning on an idle machine)
  idle, passive   OMP_WAIT_POLICY=PASSIVE forced (what passive waiting costs when nothing competes)
  hog, spinning   one busy process beside it, GOMP_SPINCOUNT=300000 (libgomp's default spin: the old behaviour)
  hog             one busy process beside it, the command's own choice (passive, as it finds the machine busy)
  hog, 1 thread   one busy process, OMP_NUM_THREADS=1
Prints the load average before each row (a row measured on a machine others load is not an idle figure),
the wait policy and threads the bench ran with, the packed median and its ratio to the idle row.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ["-m", "lifesearch_local", "bench", "judge", "--model", "tiny-mistral", "--prefix-tokens", "3000",
         "--rubrics", "24", "--json"]
ROWS = [("idle", False, {}), ("idle, passive", False, {"OMP_WAIT_POLICY": "PASSIVE"}),
        ("hog, spinning", True, {"GOMP_SPINCOUNT": "300000"}), ("hog", True, {}),
        ("hog, 1 thread", True, {"OMP_NUM_THREADS": "1"})]
OURS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS", "LIFESEARCH_OMP_WAIT")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:4])


def bench(python: str, extra: dict[str, str], repeats: int, baseline: bool, dtype: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in OURS}
    env.update(extra, PYTHONPATH=str(ROOT))
    argv = [python, *BENCH, "--repeats", str(repeats), "--baseline", "single" if baseline else "none", "--dtype", dtype]
    out = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=True)
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--baseline", action="store_true", help="also time one prompt per rubric (slow beside a hog)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                    help="bfloat16 on a CPU with AMX takes the compiled bf16 kernels (docs/kernel.md)")
    args = ap.parse_args()
    print(f"{'row':<16}{'load before (1 5 15 run/all)':<30}{'wait':<10}{'thr':>4}{'packed s':>10}{'min':>8}{'max':>8}"
          f"{'× idle':>8}" + (f"{'single s':>10}" if args.baseline else ""), flush=True)
    idle = None
    for name, hog, extra in ROWS:
        proc = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if hog else None
        try:
            if proc:
                time.sleep(2)  # the hog is running before the bench decides
            load = loadavg()
            r = bench(args.python, extra, args.repeats, args.baseline, args.dtype)
        finally:
            if proc:
                proc.kill()
                proc.wait()
        idle = idle or r["packed_s"]
        wait = extra.get("OMP_WAIT_POLICY") or r.get("omp_wait_policy") or ("spin" if "GOMP_SPINCOUNT" in extra else "default")
        print(f"{name:<16}{load:<30}{wait:<10}{r['threads']:>4}{r['packed_s']:>10.3f}{r['packed_s_min']:>8.3f}"
              f"{r['packed_s_max']:>8.3f}{r['packed_s'] / idle:>8.2f}"
              + (f"{r['naive_s']:>10.3f}" if args.baseline else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
