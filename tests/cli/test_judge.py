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


@pytest.mark.parametrize("command", [["judge", "--tasks", "t", "--reports", "r", "--model", "tiny-llama", "--out", "o"],
                                     ["agent", "--config", "c", "--out", "o"], ["sweep", "--config", "c"]])
def test_runs_0_is_refused_not_run_once(command, capsys):
    """Issue 33: `--runs 0` silently ran once."""
    from lifesearch_local.cli import main

    with pytest.raises(SystemExit) as e:
        main([*command, "--runs", "0"])
    assert e.value.code == 2 and "--runs: must be at least 1, got 0" in capsys.readouterr().err
