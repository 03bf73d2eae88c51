"""The standalone commands end to end: `judge` (killed and resumed, --limit, inputs refused before
judging) and `sweep` (repeated only where a judge samples)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lifesearch_local.errors import LifesearchError
from lifesearch_local.records import Judgment
from lifesearch_local.resources import resource_path
from lifesearch_local.run.standalone import default_web_cache
from lifesearch_local.rundir.jsonl import read_records
from tests.helpers.inputs import R, rubric, task, write_jsonl
from tests.helpers.tolerances import P_TOL

N_REPORTS, N_RUBRICS = 10, 6


@pytest.fixture
def inputs(tmp_path: Path):
    tasks = [task(f"t{i}", [rubric(f"R{k}", 0.5, criterion=f"The response should state fact {k} of topic {i}.")
                            for k in range(N_RUBRICS)]) for i in range(N_REPORTS // 2)]
    reports = [{"task_id": f"t{i}", "agent": a, "run": 0, "text": f"Report {a} {i}. " + "Some findings. " * 80}
               for i in range(N_REPORTS // 2) for a in ("a", "b")]
    cfg = tmp_path / "judge.yaml"
    cfg.write_text("judge:\n  id: tiny\n  groups_per_call: 1\n  model:\n    model: tiny-llama\n")
    return write_jsonl(tmp_path / "tasks.jsonl", tasks), write_jsonl(tmp_path / "reports.jsonl", reports), cfg


def start(inputs, out):
    t, r, cfg = inputs
    cmd = [sys.executable, "-m", "lifesearch_local", "judge", "--tasks", str(t), "--reports", str(r),
           "--config", str(cfg), "--out", str(out), "--quiet"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def interrupt(inputs, out: Path, sig: int) -> subprocess.Popen:
    proc = start(inputs, out)
    f = out / "judgments.jsonl"
    deadline = time.monotonic() + 120
    while lines(f) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    return proc


def judge(inputs, out: Path, *extra: str) -> int:
    from lifesearch_local.cli import main

    t, r, cfg = inputs
    return main(["judge", "--tasks", str(t), "--reports", str(r), "--config", str(cfg), "--out", str(out), "--quiet",
                 *extra])


def finish(inputs, out: Path) -> list[Judgment]:
    assert judge(inputs, out) == 0
    return read_records(out / "judgments.jsonl", Judgment)


def test_kill_then_resume_no_loss_no_duplicates(inputs, tmp_path):
    total = N_REPORTS * N_RUBRICS
    out = tmp_path / "killed"
    interrupt(inputs, out, signal.SIGKILL)
    partial = lines(out / "judgments.jsonl")
    assert 0 < partial < total, "the kill must land mid-run for this test to mean anything"
    js = finish(inputs, out)
    assert len(js) == len({j.key for j in js}) == total
    # and the resumed run gives exactly what an uninterrupted run gives
    clean = {j.key: j.p_true for j in finish(inputs, tmp_path / "clean")}
    assert all(abs(clean[j.key] - j.p_true) <= P_TOL for j in js)  # the killed run was another process


def test_sigterm_flushes_and_exits_zero(inputs, tmp_path):
    out = tmp_path / "term"
    proc = interrupt(inputs, out, signal.SIGTERM)
    assert proc.returncode == 0, proc.stderr.read()
    partial = lines(out / "judgments.jsonl")
    assert 0 < partial < N_REPORTS * N_RUBRICS and partial % N_RUBRICS == 0  # whole reports only
    js = finish(inputs, out)
    assert len({j.key for j in js}) == len(js) == N_REPORTS * N_RUBRICS


def test_rerun_of_a_finished_run_does_nothing(inputs, tmp_path, capsys):
    out = tmp_path / "done"
    finish(inputs, out)
    capsys.readouterr()
    assert judge(inputs, out) == 0
    assert "nothing left to judge" in capsys.readouterr().out
    assert lines(out / "judgments.jsonl") == N_REPORTS * N_RUBRICS
    assert os.path.exists(out / "manifest.json")


def test_limit_judges_the_first_tasks_only_and_resumes(inputs, tmp_path, capsys):
    def judge_limited(inputs, out: Path, limit: int) -> str:
        capsys.readouterr()
        assert judge(inputs, out, "--limit", str(limit)) == 0
        return capsys.readouterr().out

    out = tmp_path / "limited"
    stdout = judge_limited(inputs, out, 2)
    assert "--limit 2: judging 2 of 5 tasks (t0, t1) and their 4 of 10 reports" in stdout
    js = read_records(out / "judgments.jsonl", Judgment)
    assert {(j.task_id, j.agent) for j in js} == {(t, a) for t in ("t0", "t1") for a in ("a", "b")}
    assert len(js) == len({j.key for j in js}) == 2 * 2 * N_RUBRICS
    # the same line again finds nothing to do; a larger N adds only the next task's reports
    assert "nothing left to judge" in judge_limited(inputs, out, 2)
    assert lines(out / "judgments.jsonl") == 2 * 2 * N_RUBRICS
    assert f"judge tiny: {2 * N_RUBRICS} decisions" in judge_limited(inputs, out, 3)
    js = read_records(out / "judgments.jsonl", Judgment)
    assert {j.task_id for j in js} == {"t0", "t1", "t2"}
    assert len(js) == len({j.key for j in js}) == 3 * 2 * N_RUBRICS


def test_limit_must_be_positive(inputs, tmp_path, capsys):
    from lifesearch_local.cli import main

    t, r, cfg = inputs
    with pytest.raises(SystemExit) as exc:
        main(["judge", "--tasks", str(t), "--reports", str(r), "--config", str(cfg), "--out", str(tmp_path / "x"),
              "--limit", "0"])
    assert exc.value.code == 2
    assert "--limit: must be at least 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_judge_refuses_a_report_with_a_lone_surrogate_before_judging(tmp_path, capsys):
    from lifesearch_local.cli import main

    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task("t0", [rubric("R1", 0.5)])])
    reports = tmp_path / "reports.jsonl"
    reports.write_text(json.dumps(R) + "\n" + json.dumps({**R, "agent": "b", "text": "x\udfff"}) + "\n")
    cfg = tmp_path / "judge.yaml"
    cfg.write_text("judge:\n  id: tiny\n  model:\n    model: tiny-llama\n")
    code = main(["judge", "--tasks", str(tasks), "--reports", str(reports), "--config", str(cfg), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and f"{reports}:2: text: lone surrogate \\udfff" in err, err
    assert "Traceback" not in err and not (tmp_path / "out" / "judgments.jsonl").exists()


KEEP = {"sample-en-03", "sample-zh-05"}  # two small sample tasks keep the test quick


def subset(src, dst, key="task_id"):
    rows = [json.loads(x) for x in src.read_text().splitlines() if x.strip()]
    dst.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows if r.get(key, r.get("id")) in KEEP))
    return dst


def test_a_dry_run_and_a_runs_own_estimate_are_one_estimate_with_their_own_settings(inputs, tmp_path, monkeypatch):
    # the dry run: calibrated as asked, over what OUT holds, nothing created; the run's own: stored profiles
    # only, nothing downloaded, over its locked directory, in its manifest beside what it actually took
    from dataclasses import replace

    from lifesearch_local.estimate import dry_run
    from lifesearch_local.run.config import load_judge_configs
    from lifesearch_local.run.standalone import JudgeInvocation, judge_run

    calls, real = [], dry_run.estimate_judge

    def spy(rd, tasks, reports, judges, **kw):
        calls.append((rd and rd.path, rd is not None and rd.holds_lock(), len(reports), kw["calibrate"], kw["local_only"]))
        return real(rd, tasks, reports, judges, **kw)

    monkeypatch.setattr(dry_run, "estimate_judge", spy)
    t, r, cfg = inputs
    out, said = tmp_path / "out", []
    inv = JudgeInvocation(out=out, tasks=t, reports=r, judges=load_judge_configs(cfg), limit=2, show=False,
                          dry_run="never")
    est, n_reports = judge_run(inv, after=lambda *a: True, say=said.append)
    decisions = 2 * 2 * N_RUBRICS  # 2 tasks, 2 reports each
    assert n_reports == 4 and est.phases["judge/tiny"].decisions == decisions and not out.exists()
    assert calls == [(None, False, 4, "never", False)]
    assert judge_run(replace(inv, dry_run=None), after=lambda *a: True, say=said.append) is None
    assert calls[1:] == [(out, True, 4, "never", True)]
    block = json.loads((out / "manifest.json").read_text())["estimate"]
    assert block["estimate"]["phases"]["judge/tiny"]["decisions"] == decisions
    assert block["actual"]["phases"]["judge/tiny"]["decisions"] == decisions
    est, _ = judge_run(inv, after=lambda *a: True, say=said.append)  # a dry run over the OUT the run left
    assert calls[2:] == [(out, False, 4, "never", False)] and est.phases["judge/tiny"].decisions == 0
    assert said == ["--limit 2: judging 2 of 5 tasks (t0, t1) and their 4 of 10 reports"] * 3


def test_sweep_repeats_only_the_judge_that_samples(tmp_path):
    sample = resource_path("data", "sample")
    tasks = subset(sample / "tasks.jsonl", tmp_path / "tasks.jsonl", key="id")
    reports = subset(sample / "reports.jsonl", tmp_path / "reports.jsonl")
    labels = subset(sample / "labels.jsonl", tmp_path / "labels.jsonl")
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(
        f"name: t\ntasks: {tasks}\nreports: {reports}\nlabels: {labels}\njudges:\n"
        "  - {id: a, runs: 3, model: {model: tiny-llama, device: cpu}}\n"
        "  - {id: b, runs: 3, model: {model: tiny-qwen2, device: cpu}}\n"
        "  - {id: g, mode: generate, temperature: 1.0, max_tokens: 8, retries: 0, groups_per_call: 64,"
        " model: {model: tiny-llama, device: cpu}}\n"
    )
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "lifesearch_local", "sweep", "--config", str(cfg), "--out", str(out),
                        "--quiet", "--json", "--runs", "3"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"-> {out}" in r.stdout.splitlines()[0]  # where the results go, said first
    assert "judge a: choice mode is deterministic; 1 run instead of 3" in r.stdout
    assert str(out / "agreement.json") in r.stderr  # and again at the end (stderr: stdout is the JSON)
    result = json.loads(r.stdout[r.stdout.index("{"):])
    assert set(result) == {"a", "b", "g"}
    n_labels = len(labels.read_text().splitlines())
    for judge in ("a", "b"):  # deterministic: one run, not three identical ones
        assert result[judge]["n"] == n_labels and result[judge]["n_runs"] == 1
    assert result["g"]["n_runs"] == 3  # the sampling judge is repeated as asked
    accs = [m["accuracy_mean"] or 0.0 for m in result.values()]
    assert accs == sorted(accs, reverse=True)  # Table 3 order
    js = read_records(out / "judgments.jsonl", Judgment)
    assert len(js) == len({j.key for j in js}) == (1 + 1 + 3) * n_labels
    saved = json.loads((out / "agreement.json").read_text())
    for judge, m in saved.items():  # each judge's Table 3 row carries its cluster-bootstrap interval, or why not
        if m["ci95"]["accuracy_mean"] is None:  # a tiny random judge on few reports can have no spread
            assert m["ci95_reason"]["accuracy_mean"].endswith(": no interval"), judge
            continue
        lo, hi = m["ci95"]["accuracy_mean"]
        assert lo < hi and lo <= m["accuracy_mean"] <= hi, judge
    assert saved == result


def test_the_web_cache_of_a_run_directory_is_web_cache(tmp_path):
    assert default_web_cache(tmp_path) == tmp_path / "web_cache"
    (tmp_path / "web_cache").mkdir()
    (tmp_path / "webcache").mkdir()  # beside the current one it is not read, and not in the way
    assert default_web_cache(tmp_path) == tmp_path / "web_cache"


def test_an_earlier_versions_webcache_is_refused_naming_how_to_use_it(tmp_path):
    (tmp_path / "webcache").mkdir()
    with pytest.raises(LifesearchError, match=r"earlier version.*--cache .*webcache, or use a fresh directory") as e:
        default_web_cache(tmp_path)
    assert "\n" not in str(e.value)
