"""A job on the test Slurm and the comparison of its records with an uninterrupted run's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.helpers.inputs import ROOT
from tests.helpers.tolerances import P_TOL

CPUS = 2  # the cpu_small config's two 1-CPU replicas
CONFIG = "configs/cpu_small.yaml"
FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")


def job_env(tmp: Path, **extra: str) -> dict[str, str]:
    """What a user's shell would hold: this Python's `lifesearch` first on PATH, this checkout
    importable, one BLAS thread (the node has 2 cores), and Ray's logs in `tmp`."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "OMP_NUM_THREADS": "1", "LIFESEARCH_RAY_LOG_DIR": str(tmp), "RAY_USAGE_STATS_ENABLED": "0", **extra}


class Job:
    """One submitted job: its id, log and run directory."""

    def __init__(self, tmp: Path, script: str, *sbatch_args: str, out: Path | None = None,
                 env: dict[str, str] | None = None, config: str = CONFIG) -> None:
        self.tmp, self.run = tmp, out or tmp / "run"
        cmd = ["sbatch", "--parsable", "--gpus-per-node=0", f"--cpus-per-task={CPUS}",
               f"--output={tmp}/%x-%j.out", *sbatch_args, script, config, "--out", str(self.run)]
        r = subprocess.run(cmd, cwd=ROOT, env=env or job_env(tmp), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        self.id = r.stdout.strip().split(";")[0]
        self.submitted = time.monotonic()

    def info(self) -> dict[str, str]:
        r = subprocess.run(["scontrol", "show", "job", "-o", self.id], capture_output=True, text=True, timeout=30)
        return dict(re.findall(r"(\w+)=(\S*)", r.stdout))

    def state(self) -> str:
        return self.info().get("JobState", "?")

    def restarts(self) -> int:
        return int(self.info().get("Restarts", 0))

    def log(self) -> str:
        logs = list(self.tmp.glob(f"*-{self.id}.out"))
        return logs[0].read_text(errors="replace") if logs else ""

    def wait_final(self, timeout: float = 300) -> str:
        wait_for(lambda: self.state() in FINAL, timeout, f"job {self.id} to end", self)
        return self.state()

    def cancel(self) -> None:
        """End the job for good: SIGKILL to every process first, the batch shell included (a plain
        scancel sends SIGTERM, which the script's trap answers with a requeue)."""
        subprocess.run(["scancel", "--full", "--signal=KILL", self.id], capture_output=True, timeout=30)
        subprocess.run(["scontrol", "update", f"JobId={self.id}", "Requeue=0"], capture_output=True, timeout=30)
        subprocess.run(["scancel", self.id], capture_output=True, timeout=30)

    def term_batch(self) -> None:
        """Graceful preemption: SIGTERM to the batch shell only."""
        r = subprocess.run(["scancel", "--signal=TERM", "--batch", self.id], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr


def wait_for(pred: Callable[[], bool], timeout: float, what: str, job: Job | None = None, poll: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # bounded by the deadline
        if pred():
            return
        time.sleep(poll)
    detail = f"\n{job.info()}\n--- job log ---\n{job.log()[-3000:]}" if job else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")


def lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def records(run: Path) -> dict[str, list[str]]:
    """Each record file of a run, its lines as sorted canonical JSON without wall-clock fields."""
    out = {}
    for name in ("reports.jsonl", "judgments.jsonl", "reporteval.jsonl"):
        rows = [json.loads(x) for x in (run / name).read_text().splitlines() if x.strip()]
        for row in rows:
            for k in ("wall_s", "trajectory", "seconds", "created", "elapsed_s"):
                row.pop(k, None)
        out[name] = sorted(json.dumps(r, sort_keys=True) for r in rows)
    return out


def assert_same_records(run: Path, baseline: Path) -> None:
    """Exactly the baseline's records: none missing, none duplicated, the same content (p_true
    and scores within P_TOL: the same model on the same inputs, maybe in another batch or process)."""
    got, want = records(run), records(baseline)
    for name in want:
        g = [json.loads(x) for x in got[name]]
        w = [json.loads(x) for x in want[name]]
        assert len(g) == len(w), f"{name}: {len(g)} records, the uninterrupted run has {len(w)}"
        assert _close(g, w), f"{name} differs from the uninterrupted run's"


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, (int, float)):
        return abs(a - b) <= P_TOL
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b
