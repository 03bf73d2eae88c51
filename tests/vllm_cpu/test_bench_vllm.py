"""`lifesearch bench judge --backend vllm` on CPU: the three columns on the same token ids, and vLLM agrees."""

from __future__ import annotations

import json
import subprocess
import sys

from lifesearch_local.records import Report
from lifesearch_local.resources import resource_path
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from tests.helpers.inputs import write_jsonl
from tests.helpers.tolerances import P_TOL


def test_bench_judge_backend_vllm_on_cpu(tmp_path):
    tasks = load_tasks(resource_path("data", "sample", "tasks.jsonl"))
    rep = read_records(resource_path("data", "sample", "reports.jsonl"), Report)[0]
    task = next(t for t in tasks if t.id == rep.task_id)
    # one short report and three rubrics: the real path, in CI time
    t = write_jsonl(tmp_path / "tasks.jsonl", [task.model_copy(update={"rubrics": task.rubrics[:3]}).model_dump(mode="json")])
    r = write_jsonl(tmp_path / "reports.jsonl", [rep.model_copy(update={"text": rep.text[:2000]}).model_dump(mode="json")])
    run = subprocess.run([sys.executable, "-m", "lifesearch_local", "bench", "judge", "--model", "smollm2-135m",
                          "--backend", "vllm", "--reports-from", str(r), "--tasks", str(t), "--json", "--repeats", "2"],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)  # stdout is the JSON object alone: vLLM's log lines went to stderr
    assert "OpenMP thread binding" in run.stderr and out["judge_path"] is True
    assert out["decisions"] == 3 and out["device"] == "cpu" and out["dtype"] == out["vllm_dtype"] == "float32"
    assert out["max_abs_diff"] <= P_TOL and out["max_abs_diff_vllm"] <= P_TOL, out
    # vLLM computed the report once: the second and third prompts read it from the prefix cache
    assert out["vllm_cached_tokens"] > 0 and out["vllm_tokens"] < out["naive_tokens"], out
    assert out["vllm_s"] > 0 and out["speedup_vs_vllm"] > 0
    # each repeat starts from an empty prefix cache: both computed the report once
    assert len(out["vllm_runs"]) == 2 and out["vllm_tokens"] > out["prefix_tokens_min"], out
