"""Benchmark (not a timed test): `agree` and `certify` on synthetic judgments at scale, wall seconds and peak RSS.

    PYTHONPATH=$PWD python scripts/bench/stats_at_scale.py --tasks 812 [--out /tmp/scale] [--human-tasks 30]

Writes a synthetic set (6 agents × 2 judges, 20 rubrics a task, one run: tasks × 120 decisions per
judge; 812 tasks ≈ 195k decisions of the candidate), then runs each command once in a subprocess
and prints its wall time and peak resident memory (ru_maxrss of the child), with the load average
before and after (the machine may be shared: say so when quoting the figures):
- `agree` of both judges against labels = the reference judge's verdicts on every decision;
- `certify` of judge x against reference r, with `--human` labels on `--human-tasks` tasks
  (every rubric of every agent there), and the default 10,000 resamples.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

AGENTS, RUBRICS = 6, 20
TYPES = ("Objective", "Subjective")


def write_set(out: Path, n_tasks: int, human_tasks: int, seed: int = 0) -> dict[str, Path]:
    """tasks.jsonl, judgments.jsonl (judges x and r), human.jsonl; truth per rubric from a task difficulty,
    each judge flips 15% of the truth with a per-report skill (logit 0.15 + 0.8·z)."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: out / f"{k}.jsonl" for k in ("tasks", "judgments", "human")}
    with paths["tasks"].open("w") as f:
        for t in range(n_tasks):
            f.write(json.dumps({"id": f"t{t}", "language": "en", "domain": "company", "question": f"Q{t}?",
                                "rubrics": [{"id": f"R{k}", "criterion": f"states {k}", "type": TYPES[k % 2],
                                             "necessity": "Explicit", "priority": "Must Have", "weight": 1.0}
                                            for k in range(RUBRICS)]}) + "\n")
    q = rng.beta(3, 2, size=(n_tasks, AGENTS, 1))
    truth = rng.random((n_tasks, AGENTS, RUBRICS)) < q
    verdicts = {}
    for judge in ("x", "r"):
        err = 1 / (1 + np.exp(-(np.log(0.15 / 0.85) + 0.8 * rng.standard_normal((n_tasks, AGENTS, 1)))))
        verdicts[judge] = truth ^ (rng.random(truth.shape) < err)
    with paths["judgments"].open("w") as f:
        for judge, v in verdicts.items():
            p = np.clip(np.where(v, 0.8, 0.2) + 0.1 * rng.standard_normal(v.shape), 0.01, 0.99)
            for t, a, k in np.ndindex(v.shape):
                f.write(json.dumps({"task_id": f"t{t}", "agent": f"a{a}", "run": 0, "rubric_id": f"R{k}",
                                    "judge": judge, "satisfied": bool(v[t, a, k]), "p_true": round(float(p[t, a, k]), 4)})
                        + "\n")
    labelled = rng.choice(n_tasks, size=min(human_tasks, n_tasks), replace=False)
    with paths["human"].open("w") as f:
        for t in labelled:
            for a, k in np.ndindex(AGENTS, RUBRICS):
                f.write(json.dumps({"task_id": f"t{t}", "agent": f"a{a}", "run": 0, "rubric_id": f"R{k}",
                                    "satisfied": bool(truth[t, a, k]), "source": "human"}) + "\n")
    return paths


def timed(cmd: list[str]) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds (user + system), peak RSS in MB of the child, exit code) of one command;
    CPU seconds move less than wall seconds when other jobs share the machine. Run one command per
    process (--only) for its own peak: ru_maxrss of children is the largest so far."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        print(proc.stderr[-2000:], file=sys.stderr)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, r1.ru_maxrss / 1024, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=812)
    ap.add_argument("--human-tasks", type=int, default=30)
    ap.add_argument("--out", default="/tmp/lifesearch-stats-at-scale")
    ap.add_argument("--only", choices=("agree", "certify"), help="run one command only")
    args = ap.parse_args()
    out = Path(args.out) / str(args.tasks)
    paths = write_set(out, args.tasks, args.human_tasks)
    n = args.tasks * AGENTS * RUBRICS
    base = [sys.executable, "-m", "lifesearch_local"]
    common = ["--tasks", str(paths["tasks"]), "--labels-from-judgments", str(paths["judgments"]), "--label-judge", "r"]
    cmds = {"agree": [*base, "agree", "--judgments", str(paths["judgments"]), *common, "--json"],
            "certify": [*base, "certify", "--judgments", str(paths["judgments"]), "--judge", "x", *common,
                        "--human", str(paths["human"]), "--json"]}
    print(f"{args.tasks} tasks, {n} decisions per judge; load average before: {os.getloadavg()}")
    for name, cmd in cmds.items():
        if args.only and name != args.only:
            continue
        wall, cpu, mb, rc = timed(cmd)
        print(f"{name}: {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {mb:.0f} MB, exit {rc}; "
              f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
