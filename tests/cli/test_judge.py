"""`lifesearch judge`: its summary line and the generate-mode flags it checks."""

from __future__ import annotations

import pytest

from lifesearch_local.records import Judgment
from lifesearch_local.rundir.jsonl import read_records
from tests.helpers.inputs import SAMPLE


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


def test_a_busy_machine_is_said_under_the_judges_rate(tmp_path, capsys, monkeypatch):
    from lifesearch_local.cli.judge import report
    from lifesearch_local.judge.config import JudgeConfig
    from lifesearch_local.run.standalone import busy_line
    from lifesearch_local.rundir.directory import RunDir
    from serving._util import threads
    from serving.config import model_config

    monkeypatch.setattr(threads, "_loadavg", lambda: "4.00 3.00 2.00 5/300 9")
    monkeypatch.setattr(threads, "read_limits", lambda env=None, reserved=None: threads.CpuLimits(2, None, None))
    local = JudgeConfig(id="tiny", model=model_config(model="tiny-llama"))
    remote = JudgeConfig(id="r", model=model_config(backend="openai", model="m", base_url="http://127.0.0.1:9/v1"))
    busy = busy_line([local])
    assert busy is not None and busy.startswith("machine busy: load average 4, 4 other busy process(es)")
    assert busy_line([remote]) is None  # an endpoint computes elsewhere
    report(local, {"decisions": 6, "wall_s": 1.5, "decisions_per_s": 4.0, "machine_busy": busy}, RunDir(tmp_path))
    said = capsys.readouterr()
    assert said.out.startswith("judge tiny: 6 decisions in 1.5 s") and said.err.strip() == busy


def test_generate_mode_answer_cap_and_retries_from_the_command_line(tmp_path, capsys):
    import json

    from lifesearch_local.cli import main
    from lifesearch_local.judge.config import JudgeConfig
    from serving.config import model_config

    sample = SAMPLE
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


def _judged(path) -> list[Judgment]:
    """Every line of a judgments file, which must all parse (a torn line would not)."""
    return read_records(path, Judgment) if path.exists() else []


def test_judge_on_a_full_disk_is_one_line_exit_1_and_resumes_clean(tmp_path, capsys):
    """`judge` on a real tmpfs filled up mid-run (no injection): one line naming the file and "no space
    left on device", exit 1, no *.tmp left; after space is freed the same command finishes with
    nothing lost, nothing twice, no torn line."""
    from lifesearch_local.cli import main
    from tests.helpers.diskfull import PAGE, fill, small_tmpfs
    from tests.helpers.inputs import rubric, task, write_jsonl

    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task(f"t{i}", [rubric(f"R{k}", 0.5) for k in range(6)]) for i in range(4)])
    reports = write_jsonl(tmp_path / "reports.jsonl", [
        {"task_id": f"t{i}", "agent": "a", "run": 0, "text": f"Report on t{i}. " * 20} for i in range(4)])
    with small_tmpfs(tmp_path / "fs", 256) as fs:
        out = fs / "run"
        argv = ["judge", "--tasks", str(tasks), "--reports", str(reports), "--model", "tiny-llama", "--id", "tiny",
                "--out", str(out), "--quiet"]
        assert main([*argv, "--limit", "1"]) == 0
        first = len(_judged(out / "judgments.jsonl"))
        assert first == 6
        for leave in (0, PAGE):  # nothing left, then room for a page or two of records
            filler = fill(fs, leave)
            capsys.readouterr()
            assert main(argv) == 1
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith(f"error: {out}/") and "no space left on device" in err[0], err
            assert "Traceback" not in "\n".join(err)
            assert list(fs.rglob("*.tmp")) == []
            js = _judged(out / "judgments.jsonl")
            assert len(js) == len({j.key for j in js}) >= first
            filler.unlink()
        assert main(argv) == 0
        js = _judged(out / "judgments.jsonl")
        assert len(js) == len({j.key for j in js}) == 24
        assert list(fs.rglob("*.tmp")) == []


def test_judge_refuses_a_symlinked_judgments_file_and_leaves_its_target_alone(tmp_path, capsys):
    """The issue's case: `x/judgments.jsonl -> /some/file` made `judge --out x` append 28 records to that
    file; now one line refuses it and the file is as it was."""
    from lifesearch_local.cli import main
    from tests.helpers.cli import judge_sample_args

    victim = tmp_path / "victim.jsonl"
    victim.write_text("")
    out = tmp_path / "x"
    out.mkdir()
    (out / "judgments.jsonl").symlink_to(victim)
    assert main(judge_sample_args(out, "--model", "tiny-llama")) == 2
    err = capsys.readouterr().err
    assert "judgments.jsonl: is a symbolic link" in err and "Traceback" not in err
    assert victim.read_text() == ""


@pytest.mark.parametrize("command", [["judge", "--tasks", "t", "--reports", "r", "--model", "tiny-llama", "--out", "o"],
                                     ["agent", "--config", "c", "--out", "o"], ["sweep", "--config", "c"]])
def test_runs_0_is_refused_not_run_once(command, capsys):
    """Found in use: `--runs 0` silently ran once."""
    from lifesearch_local.cli import main

    with pytest.raises(SystemExit) as e:
        main([*command, "--runs", "0"])
    assert e.value.code == 2 and "--runs: must be at least 1, got 0" in capsys.readouterr().err
