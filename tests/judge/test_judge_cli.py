"""`lifesearch judge`: killed mid-run from the shell and resumed, it finishes with no duplicates.
(The runs that are not signalled call the CLI in this process: the same code, without a
second start of torch.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import rubric, task, write_jsonl

from lifesearch_local.records import Judgment
from lifesearch_local.rundir.jsonl import read_records

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
    assert all(abs(clean[j.key] - j.p_true) < 1e-6 for j in js)


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


def test_the_summary_of_a_judge_stopped_before_its_first_report_does_not_say_it_is_done(tmp_path, capsys):
    from lifesearch_local.cli.judge import report
    from lifesearch_local.judge.config import JudgeConfig
    from lifesearch_local.rundir.directory import RunDir
    from serving.config import model_config

    cfg, rd = JudgeConfig(id="tiny", model=model_config(model="tiny-llama")), RunDir(tmp_path)
    assert report(cfg, {"decisions": 0, "wall_s": 0.2, "stopped_early": True}, rd) is False
    out = capsys.readouterr().out
    assert "0 decisions in 0.2 s (stopped before the first report)" in out and "nothing left" not in out
    assert "rerun the same command to finish" in out
    assert report(cfg, {"decisions": 0, "wall_s": 0.0}, rd) is True
    assert "(nothing left to judge)" in capsys.readouterr().out


def test_generate_mode_answer_cap_and_retries_from_the_command_line(tmp_path, capsys):
    import json

    from lifesearch_local.cli import main
    from lifesearch_local.judge.config import JudgeConfig
    from serving.config import model_config

    sample = Path(__file__).resolve().parents[2] / "data" / "sample"
    base = ["judge", "--tasks", str(sample / "tasks.jsonl"), "--reports", str(sample / "reports.jsonl"),
            "--model", "tiny-llama", "--mode", "generate", "--limit", "1", "--quiet"]
    assert main([*base, "--max-tokens", "16", "--retries", "0", "--out", str(tmp_path / "capped")]) == 0
    capped = JudgeConfig(model=model_config(model="tiny-llama"), mode="generate", max_tokens=16, retries=0)
    assert capped.id != JudgeConfig(model=model_config(model="tiny-llama"), mode="generate").id  # says what judged
    stage = json.loads((tmp_path / "capped" / "manifest.json").read_text())["stages"][f"judge/{capped.id}"]
    # one attempt of at most 16 tokens per decision (the random model never writes the JSON verdict)
    assert stage["decisions"] == 28 and stage["generate_output_tokens"] <= 28 * 16
    js = read_records(tmp_path / "capped" / "judgments.jsonl", Judgment)
    assert len(js) == 28 and all(j.judge == capped.id for j in js)
    with pytest.raises(SystemExit):
        main([*base, "--max-tokens", "4", "--out", str(tmp_path / "x")])
    assert "--max-tokens: must be at least 8, got 4" in capsys.readouterr().err
