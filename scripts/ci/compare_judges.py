"""docs/compare-judges.md exactly as written, with the real smollm2-135m as the reference judge (the test suite
runs it with a tiny stand-in, tests/test_docs.py): its `bash` blocks in order, in a scratch directory holding
the repository's data and configs, `lifesearch` on PATH; each step's time and the load average before it;
then the checks only the full run can make (the decision the doc quotes is the one certify made).

    PYTHONPATH=. python scripts/ci/compare_judges.py [--keep DIR]

Several minutes on one CPU core (the smollm2-135m judge scores 114 decisions of real prompts).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "compare-judges.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", DOC.read_text(encoding="utf-8"), flags=re.S | re.M)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", help="run in this directory (kept) instead of a temporary one")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="compare-judges-"))
    work.mkdir(parents=True, exist_ok=True)
    for name in ("data", "configs"):
        if not (work / name).exists():
            (work / name).symlink_to(ROOT / name)
    (work / "bin").mkdir(exist_ok=True)
    shim = work / "bin" / "lifesearch"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m lifesearch_local "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{work / 'bin'}:{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    outs = []
    for i, script in enumerate(blocks("bash"), 1):
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        t0 = time.monotonic()
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True, text=True)
        print(f"step {i}: {time.monotonic() - t0:.1f} s (load average before: {load}): {script.splitlines()[0][:90]}",
              flush=True)
        if r.returncode:
            print(f"step {i} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}", file=sys.stderr)
            return 1
        outs.append(r.stdout)
    study = json.loads((work / "runs/compare/sweep/certify.json").read_text())
    quoted = f"verdict ({study['decision']})" in DOC.read_text(encoding="utf-8")
    print(f"certify's decision: {study['decision']}; quoted by the doc: {'yes' if quoted else 'NO'}")
    print(f"work directory: {work}")
    return 0 if quoted and len(outs) == 5 else 1


if __name__ == "__main__":
    sys.exit(main())
