"""The two hosts of scripts/ci/multinode_env.sh as the tests see them: its settings, its subcommands, a judge-only config."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from tests.helpers.inputs import ROOT

ENV_SCRIPT = os.environ.get("LIFESEARCH_MN_ENV", "")
RAY_ADDRESS = os.environ.get("LIFESEARCH_MN_RAY_ADDRESS", "")
HEAD, WORKER = os.environ.get("LIFESEARCH_MN_HEAD", "lsmn-head"), os.environ.get("LIFESEARCH_MN_WORKER", "lsmn-worker")
HEAD_IP, WORKER_IP = os.environ.get("LIFESEARCH_MN_HEAD_IP", "10.213.77.1"), os.environ.get("LIFESEARCH_MN_WORKER_IP", "10.213.77.2")


def env_script(*args: str, timeout: float = 180) -> None:
    """Run a subcommand of scripts/ci/multinode_env.sh (kill-worker, worker-up)."""
    r = subprocess.run([ENV_SCRIPT, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, f"multinode_env.sh {' '.join(args)}: {r.stdout[-2000:]}{r.stderr[-2000:]}"


def judge_config(tmp: Path, **ray: object) -> Path:
    """configs/cpu_small.yaml as a judge-only run over the sample reports (342 decisions, small
    calls so that both replicas hold work all through the phase)."""
    cfg = yaml.safe_load((ROOT / "configs" / "cpu_small.yaml").read_text())
    for k in ("agents", "task_ids", "reporteval"):
        cfg.pop(k)
    cfg.update(tasks=str(ROOT / "data/sample/tasks.jsonl"), reports=str(ROOT / "data/sample/reports.jsonl"))
    cfg["judge"]["groups_per_call"] = 2
    # a replica whose node is gone cannot be placed again: the next phase goes on without it after 30 s
    cfg["ray"].update(call_timeout_s=120, startup_timeout_s=30, **ray)
    path = tmp / "judge.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path
