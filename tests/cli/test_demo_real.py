"""`lifesearch demo --real`: smollm2-135m as agent and judge. A 135M model is near chance as a
judge: the tests check the real path (real tokenizer, template, long reports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lifesearch_local.analysis.caveats import caveats
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Judgment, Report
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from serving.config import model_config

pytestmark = pytest.mark.slow


AGENT = "smollm2-135m-agent"
JUDGE = JudgeConfig(model=model_config(model="smollm2-135m")).id  # smollm2-135m/choice/<hash>


@pytest.fixture(scope="module")
def real_demo(smollm2_path, tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("real-demo") / "run"
    # `demo --real`: smollm2-135m as agent and judge, on the first task with two agent steps
    r = subprocess.run([sys.executable, "-m", "lifesearch_local", "demo", "--real", "--out", str(out), "--quiet"],
                       capture_output=True, text=True, timeout=900, env={**os.environ})
    assert r.returncode == 0, r.stderr[-3000:]
    print(r.stdout)
    return out, r.stdout


def test_demo_with_the_real_model(real_demo):
    out, stdout = real_demo
    assert "RANDOM weights" not in stdout and "random weights" not in stdout and "NOTE: smollm2-135m" in stdout
    # a 135M judge says "satisfied" to (nearly) everything: the caveat of a near-constant judge, where it applies
    constant = [line for line in caveats(judgments=read_records(out / "judgments.jsonl", Judgment)) if "near-constant" in line]
    assert all(line in stdout for line in constant)
    assert ("near-constant" in (out / "report.html").read_text(encoding="utf-8")) == bool(constant)
    assert f"LifeSearch scores — judge {JUDGE}" in stdout
    assert 'id="random-weights"' not in (out / "report.html").read_text(encoding="utf-8")
    tasks = load_tasks(out / "tasks.jsonl")
    assert [t.id for t in tasks] == ["sample-en-01"]
    reports = read_records(out / "reports.jsonl", Report)
    assert sorted(r.agent for r in reports) == sorted(["sample-thorough", "sample-shallow", AGENT])
    judgments = read_records(out / "judgments.jsonl", Judgment)
    rubrics = [r.id for r in tasks[0].rubrics if r.weight > 0]
    assert len(judgments) == 3 * len(rubrics) and all(j.judge == JUDGE for j in judgments)
    p = [j.p_true for j in judgments]
    assert all(0.0 < x < 1.0 for x in p) and len(set(p)) > len(rubrics)  # real logits, not one constant
    labelled = sum(1 for line in (out / "labels.jsonl").read_text().splitlines() if line.strip())
    assert labelled > 0 and f"Judge agreement with {labelled} labels" in stdout  # only this task's labels
    stages = json.loads((out / "manifest.json").read_text())["stages"]
    assert stages[f"judge/{JUDGE}"]["decisions"] == len(judgments)


def test_agent_with_the_real_model_parses_or_counts(real_demo):
    """Whatever the real model writes, each step is a final answer, parsed tool calls, or counted
    call errors, and the run ends in a report; never a crash."""
    out, _ = real_demo
    report = next(r for r in read_records(out / "reports.jsonl", Report) if r.agent == AGENT)
    rows = [json.loads(line) for line in (out / report.trajectory).read_text().splitlines()]
    steps = [r for r in rows if r["type"] == "step"]
    assert rows[0]["type"] == "start" and rows[-1]["type"] == "end" and steps
    for s in steps[:-1]:  # every step before the last one acted: its calls ran or failed visibly
        assert s.get("calls") or s.get("call_errors"), s
    assert rows[-1]["status"] == report.status and report.iterations == len(steps)
    assert report.status in ("completed", "budget", "clarification") and report.text.strip(), report
    print(f"{AGENT}: {report.status} after {report.iterations} step(s); tool calls "
          f"{sum(len(s.get('calls', [])) for s in steps)}, call errors {sum(len(s.get('call_errors', [])) for s in steps)}")
