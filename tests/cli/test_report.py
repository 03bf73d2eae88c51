"""`lifesearch report`: on a run directory, elsewhere with --out, and after `judge --out`."""

from __future__ import annotations

import argparse

from tests.helpers.inputs import AGREE
from tests.helpers.report_runs import make_run_dir


def test_report_cli(tmp_path, capsys):
    from lifesearch_local.cli import report

    run = make_run_dir(tmp_path / "run", labels=False)
    p = argparse.ArgumentParser(prog="lifesearch")
    report.register(p.add_subparsers())
    out = tmp_path / "elsewhere.html"
    args = p.parse_args(["report", str(run), "--labels", str(AGREE / "labels.jsonl"), "--out", str(out)])
    assert args.func(args) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert 'id="agreement"' in out.read_text() and not (run / "report.html").exists()


def test_report_after_a_real_judge_out(tmp_path, capsys):
    """The issue's case: `lifesearch judge --out DIR` then `lifesearch report DIR`, no other flag."""
    from lifesearch_local.cli import main

    out = tmp_path / "judged"
    assert main(["judge", "--tasks", str(AGREE / "tasks.jsonl"), "--reports", str(AGREE / "reports.jsonl"),
                 "--model", "tiny-llama", "--out", str(out), "--limit", "1", "--quiet"]) == 0
    assert not (out / "tasks.jsonl").exists()
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert 'id="scores-tiny-llama-choice-' in page and "Mean [95% CI]" in page


def test_report_on_a_full_disk_leaves_no_temporary(tmp_path, capsys):
    """`report` on a real tmpfs with no room for report.html (no injection): one line naming it and
    "no space left on device", exit 1, no report.html.tmp; once space is freed it is written (issue 32, item 8)."""
    from lifesearch_local.cli import main
    from tests.helpers.diskfull import fill, small_tmpfs

    with small_tmpfs(tmp_path / "fs", 512) as fs:
        run = make_run_dir(fs / "run")
        filler = fill(fs)
        assert main(["report", str(run)]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"error: {run / 'report.html'}: no space left on device; free some space and rerun the same "
                       "command (what was written before is kept)"]
        assert not (run / "report.html").exists() and not (run / "report.html.tmp").exists()
        filler.unlink()
        assert main(["report", str(run)]) == 0
        assert (run / "report.html").stat().st_size > 0 and not (run / "report.html.tmp").exists()
