"""`lifesearch judge` with `backend: vllm` on CPU, written as a user would (no kv_cache_gib, no binding):
vLLM computes on every core this process may use, and the KV cache is sized and said in the log.

Before: vLLM's log said `core ids=[0], reserved_cpus=[1]` on this 2-core machine (half of it idle),
and with no kv_cache_gib vLLM asked for 90% of the RAM and failed after a long traceback.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import yaml

from lifesearch_local.records import Report
from lifesearch_local.resources import resource_path
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from tests.helpers.inputs import write_jsonl


def test_judge_through_vllm_on_cpu_binds_every_allowed_core_and_sizes_the_kv_cache(tmp_path):
    tasks = load_tasks(resource_path("data", "sample", "tasks.jsonl"))
    rep = read_records(resource_path("data", "sample", "reports.jsonl"), Report)[0]
    task = next(t for t in tasks if t.id == rep.task_id)
    t = write_jsonl(tmp_path / "tasks.jsonl", [task.model_copy(update={"rubrics": task.rubrics[:2]}).model_dump(mode="json")])
    r = write_jsonl(tmp_path / "reports.jsonl", [rep.model_copy(update={"text": rep.text[:1500]}).model_dump(mode="json")])
    cfg = tmp_path / "judge.yaml"
    # what a user writes: no kv_cache_gib, no cpu_cores; max_model_len keeps the sized cache small
    cfg.write_text(yaml.safe_dump({"judge": {"id": "vllm-cpu", "mode": "choice", "model": {
        "backend": "vllm", "model": "smollm2-135m", "enforce_eager": True, "max_model_len": 4096}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_CPU_")}
    run = subprocess.run([sys.executable, "-m", "lifesearch_local", "judge", "--config", str(cfg), "--tasks", str(t),
                          "--reports", str(r), "--out", str(tmp_path / "run"), "--quiet"],
                         capture_output=True, text=True, timeout=900, env=env)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    assert "Traceback" not in log
    # vLLM's own report of its binding: one worker on every allowed core, none reserved
    cores = [int(c) for c in re.search(r"local_rank=0, core ids=\[([\d, ]+)\]", log).group(1).split(",")]
    assert cores == sorted(os.sched_getaffinity(0)), log[-3000:]
    assert "reserved_cpus=[]" in log
    assert re.search(r"kv_cache_gib not set; KV cache [\d.]+ GiB = [\d,]+ tokens \(max_model_len 4096", log), log[-3000:]
    judged = (tmp_path / "run" / "judgments.jsonl").read_text().splitlines()
    assert len(judged) == 2
