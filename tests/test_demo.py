"""`lifesearch demo` (the README's first command) end to end, offline, with the tiny models."""

from __future__ import annotations

import json
import subprocess
import sys

from lifesearch_local.jsonl import read_records
from lifesearch_local.records import Judgment, Report
from lifesearch_local.tasks import load_tasks


def test_demo_runs_offline_and_writes_a_complete_run_directory(tmp_path):
    out = tmp_path / "demo"
    r = subprocess.run([sys.executable, "-m", "lifesearch_local", "demo", "--out", str(out), "--quiet"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "RANDOM weights" in r.stdout and "Judge agreement with 342 labels" in r.stdout
    for name in ("config.yaml", "manifest.json", "tasks.jsonl", "reports.jsonl", "labels.jsonl",
                 "judgments.jsonl", "scores.json", "report.html"):
        assert (out / name).is_file(), name
    tasks = load_tasks(out / "tasks.jsonl")
    reports = read_records(out / "reports.jsonl", Report)
    agents = {"sample-thorough", "sample-shallow", "tiny-qwen3-agent"}
    assert {rep.agent for rep in reports} == agents and len(reports) == 3 * len(tasks)
    assert len(list((out / "trajectories").glob("*__tiny-qwen3-agent__r0.jsonl"))) == len(tasks)
    judgments = read_records(out / "judgments.jsonl", Judgment)
    per_report = sum(1 for t in tasks for rub in t.rubrics if rub.weight > 0)
    assert len(judgments) == len({j.key for j in judgments}) == 3 * per_report
    scores = json.loads((out / "scores.json").read_text())
    assert set(scores["agents"]) == agents
    stages = json.loads((out / "manifest.json").read_text())["stages"]
    assert stages["judge/tiny-qwen3-choice"]["kernel_form"] == "two_stage"
    assert stages["agent/tiny-qwen3-agent"]["finished"] == len(tasks)
    # rerun: nothing left to do, no model loaded, same judgments
    r2 = subprocess.run([sys.executable, "-m", "lifesearch_local", "demo", "--out", str(out), "--quiet"],
                        capture_output=True, text=True, timeout=300)
    assert r2.returncode == 0 and len(read_records(out / "judgments.jsonl", Judgment)) == len(judgments)
