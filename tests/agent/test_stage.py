"""The agent stage: many runs against one engine, reports and trajectories, SIGTERM and resume."""

from __future__ import annotations

import json
import os
import signal

from lifesearch_local.agent.stage import agent_stage
from lifesearch_local.agent.trajectory import trajectory_name
from lifesearch_local.records import Report
from lifesearch_local.rundir.directory import RunDir
from tests.helpers.agent import agent_config, call, turn, web_config
from tests.helpers.doubles import ScriptedBackend
from tests.helpers.terminal import Terminal

PAGES = ["https://wexmoor.example/services/parking/residential-permits", "https://tallyflow.example/docs/changelog"]


def researcher(req):
    """Every task: search, fetch two pages at once, answer."""
    n = turn(req)
    if n == 0:
        return call("web_search", query=req.messages[1]["content"][:60])
    if n == 1:
        return call("web_fetch", url=PAGES[0]) + call("web_fetch", url=PAGES[1])
    return f"Answer to: {req.messages[1]['content'][:30]}"


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_many_tasks_share_one_engine_in_batches(tmp_path, sample_tasks, corpus_index):
    backend = ScriptedBackend(researcher, delay_s=0.02)
    rd = RunDir(tmp_path)
    cfg = agent_config(tools={"enabled": ["web_search", "web_fetch"]})
    stats = agent_stage(rd, list(sample_tasks.values()), cfg, backend, web_config(corpus_index), runs=2, show=False)
    reports = rd.load("reports.jsonl", Report)
    assert len(reports) == 20 and len({r.key for r in reports}) == 20
    assert all(r.status == "completed" and r.iterations == 3 and r.output_tokens for r in reports)
    assert stats["finished"] == 20 and stats["iterations"] == 60 and stats["model_calls"] == 60
    assert stats["max_batch"] >= 8 and stats["batches"] < 30  # the engine saw batches, not 60 single calls
    fetch = stats["web"]["fetch"]  # sample-zh-01's cutoff (2026-03-31) is before the changelog's date
    assert (fetch["corpus"], fetch["live"], fetch["failures"]) == (38, 0, {"after_cutoff": 2})
    assert stats["output_tokens"] == sum(r.output_tokens for r in reports)
    manifest = rd.manifest()
    assert manifest.stages["agent/scripted"]["finished"] == 20 and "prompts/agent_system" in manifest.hashes
    assert len(list((tmp_path / "trajectories").glob("*.jsonl"))) == 20


def test_sigterm_finishes_the_step_and_a_rerun_resumes_without_duplicates(tmp_path, sample_tasks, corpus_index):
    tasks = list(sample_tasks.values())[:4]
    sent = []

    def stop_midway(req):
        if turn(req) == 1 and req.messages[1]["content"] == tasks[2].question and not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)  # Slurm preemption, while decisions are in flight
        return researcher(req)

    rd = RunDir(tmp_path)
    cfg = agent_config(tools={"enabled": ["web_search", "web_fetch"]}, concurrency=2)
    web = web_config(corpus_index)
    stats = agent_stage(rd, tasks, cfg, ScriptedBackend(stop_midway), web, show=False)
    assert stats["stopped_early"] and sent
    first = rd.load("reports.jsonl", Report)
    assert len(first) < 4
    unfinished = [t for t in tasks if t.id not in {r.task_id for r in first}]
    stopped = [lines(tmp_path / trajectory_name(t.id, "scripted", 0)) for t in unfinished
               if (tmp_path / trajectory_name(t.id, "scripted", 0)).exists()]
    assert stopped and all(traj[-1]["type"] == "stopped" for traj in stopped)
    with open(tmp_path / "reports.jsonl", "a") as f:
        f.write('{"task_id": "torn by a kill')  # a hard kill mid-append leaves a partial line

    again = agent_stage(rd, tasks, cfg, ScriptedBackend(researcher), web, show=False)
    reports = rd.load("reports.jsonl", Report)
    assert not again["stopped_early"] and again["pending"] == len(unfinished)
    assert sorted(r.task_id for r in reports) == sorted(t.id for t in tasks)  # each exactly once
    for t in unfinished:
        traj = lines(tmp_path / trajectory_name(t.id, "scripted", 0))
        assert [r["type"] for r in traj] == ["start", "step", "step", "step", "end"]  # restarted from scratch
    third = agent_stage(rd, tasks, cfg, ScriptedBackend(lambda r: 1 / 0), web, show=False)
    assert third["pending"] == 0 and len(rd.load("reports.jsonl", Report)) == 4


def test_a_resumed_agent_bar_says_how_many_runs_were_done(tmp_path, sample_tasks, monkeypatch):
    tasks, rd = list(sample_tasks.values())[:4], RunDir(tmp_path)
    cfg = agent_config(tools={"enabled": []})
    answer = ScriptedBackend(lambda req: "The answer.")
    agent_stage(rd, tasks[:2], cfg, answer, web_config(), show=False)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr("sys.stderr", err := Terminal())
    stats = agent_stage(rd, tasks, cfg, answer, web_config(), show=True)
    assert stats["finished"] == 2 and "agent scripted (2 already done)" in err.getvalue() and "4/4" in err.getvalue()
