"""Benchmark (not a timed test): `lifesearch view` on a synthetic run of 100k decisions.

    python scripts/bench/view_scale.py DIR [--tasks 1000] [--rubrics 20] [--agents 5]

Writes DIR (once: tasks, reports, judgments of one judge, labels on a tenth of the tasks), starts
`lifesearch view DIR --port 0` and prints, with the load average: seconds from launch to the URL, to
the first decisions page, and for a filtered page, a search, a decision page and the leaderboard
(its bootstrap runs when that page is first opened).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def write_run(root: Path, n_tasks: int, n_rubrics: int, n_agents: int) -> None:
    rng = random.Random(0)
    root.mkdir(parents=True, exist_ok=True)
    rubric = {"type": "Objective", "necessity": "Explicit", "priority": "Must Have", "weight": 0.5}
    with open(root / "tasks.jsonl", "w") as f:
        for t in range(n_tasks):
            rubrics = [{"id": f"R{r}", "criterion": f"The report states fact {r} of task {t}.", **rubric}
                       for r in range(n_rubrics)]
            f.write(json.dumps({"id": f"t{t}", "language": "en", "domain": "company", "question": f"Question {t}?",
                                "rubrics": rubrics}) + "\n")
    with open(root / "reports.jsonl", "w") as f:
        for t in range(n_tasks):
            for a in range(n_agents):
                f.write(json.dumps({"task_id": f"t{t}", "agent": f"agent{a}", "text": "lorem ipsum " * 400}) + "\n")
    with open(root / "judgments.jsonl", "w") as f, open(root / "labels.jsonl", "w") as labels:
        for t in range(n_tasks):
            for a in range(n_agents):
                for r in range(n_rubrics):
                    p = rng.random()
                    key = {"task_id": f"t{t}", "agent": f"agent{a}", "run": 0, "rubric_id": f"R{r}"}
                    f.write(json.dumps({**key, "judge": "j", "satisfied": p >= 0.5, "p_true": p,
                                        "truncated_tokens": 1200 if r == 0 and a == 0 else 0,
                                        "reason": f"reason {t} {a} {r}"}) + "\n")
                    if t % 10 == 0:
                        labels.write(json.dumps({**key, "satisfied": rng.random() < 0.5}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--rubrics", type=int, default=20)
    ap.add_argument("--agents", type=int, default=5)
    args = ap.parse_args()
    if not (args.dir / "judgments.jsonl").exists():
        write_run(args.dir, args.tasks, args.rubrics, args.agents)
    print(f"load average before: {os.getloadavg()}")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "lifesearch_local", "view", str(args.dir), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = proc.stdout.readline().split()[-1]
        print(f"launch to URL printed: {time.perf_counter() - t0:.2f} s")
        for path in ("s/0/decisions", "s/0/decisions?agreement=disagree&sort=confidence&page=3",
                     "s/0/decisions?q=reason+999&verdict=true", "s/0/d/54321", "s/0/"):
            start = time.perf_counter()
            body = urllib.request.urlopen(url + path, timeout=600).read()
            print(f"GET /{path}: {time.perf_counter() - start:.2f} s ({len(body)} bytes)")
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
