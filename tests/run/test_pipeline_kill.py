"""`kill -9` at any stage of `lifesearch run` (agent, judge, ReportEval), then the same command:
nothing lost, nothing duplicated, and the same results as a run that was never interrupted.
(The killed run is a process of its own; the clean run and the rerun call the CLI in this one.)"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers.inputs import ROOT
from tests.helpers.tolerances import P_TOL

TASKS = ["sample-en-03", "sample-zh-05"]
pytestmark = pytest.mark.slow


def config(tmp_path: Path, name: str) -> Path:
    cfg = yaml.safe_load((ROOT / "configs" / "cpu_small.yaml").read_text())
    cfg.update(out=str(tmp_path / name), task_ids=TASKS, reports=str(ROOT / "data/sample/reports.jsonl"))
    cfg.pop("ray")  # in-process: the Ray path has its own tests (tests/serving/ray/test_pool.py, test_pipeline_cluster.py)
    cfg["agents"][0]["concurrency"] = 1  # one report at a time, so a kill can land between them
    cfg["judge"]["groups_per_call"] = 1
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def run(cfg: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lifesearch_local", "run", "--config", str(cfg), "--quiet"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_here(cfg: Path) -> None:
    """`lifesearch run --config cfg` in this process, from the repository root (the config's paths)."""
    from lifesearch_local.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        assert main(["run", "--config", str(cfg), "--quiet"]) == 0


def lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def keys(rows: list[dict], fields: tuple[str, ...]) -> list[tuple]:
    return [tuple(r.get(f) for f in fields) for r in rows]


FILES = {
    "reports.jsonl": ("task_id", "agent", "run"),
    "judgments.jsonl": ("judge", "judge_run", "task_id", "agent", "run", "rubric_id"),
    "reporteval.jsonl": ("judge", "metric", "task_id", "agent", "run"),
}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clean")
    run_here(config(tmp, "clean"))
    return {name: lines(tmp / "clean" / name) for name in FILES}


@pytest.mark.parametrize("stage_file", ["reports.jsonl", "judgments.jsonl", "reporteval.jsonl"])
def test_kill_9_then_rerun(clean, tmp_path, stage_file):
    cfg = config(tmp_path, "killed")
    out = tmp_path / "killed"
    p = run(cfg)
    deadline = time.monotonic() + 600
    # the agent's own reports are the ones this run writes (imported sample reports come first)
    while p.poll() is None and time.monotonic() < deadline:
        rows = lines(out / stage_file) if (out / stage_file).exists() else []
        if stage_file == "reports.jsonl":
            rows = [r for r in rows if r["agent"] == "tiny-qwen3-agent"]
        if rows:
            break
        time.sleep(0.01)
    assert p.poll() is None, "the run finished before the kill"
    p.send_signal(signal.SIGKILL)
    p.wait()
    got_before = {name: len(lines(out / name)) for name in FILES}
    assert got_before[stage_file] < len(clean[stage_file])  # the kill landed inside this stage
    run_here(cfg)
    for name, fields in FILES.items():
        rows = lines(out / name)
        assert len(keys(rows, fields)) == len(set(keys(rows, fields))), f"duplicates in {name}"
        assert sorted(keys(rows, fields)) == sorted(keys(clean[name], fields)), f"lost or extra records in {name}"
    # the same verdicts as the uninterrupted run (greedy agent, deterministic judge)
    p_true = {k: r["p_true"] for k, r in zip(keys(clean["judgments.jsonl"], FILES["judgments.jsonl"]),
                                              clean["judgments.jsonl"])}
    for k, r in zip(keys(lines(out / "judgments.jsonl"), FILES["judgments.jsonl"]), lines(out / "judgments.jsonl")):
        assert abs(p_true[k] - r["p_true"]) <= P_TOL  # partly judged by the killed process
