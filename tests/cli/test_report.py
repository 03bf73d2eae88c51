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
    """The issue's case: `lifesearch judge --out DIR` then `lifesearch report DIR`, no other flag. The
    judge saw one of the two tasks (--task-ids): the report of the whole tasks file is refused as
    `score` refuses it (9,376 missing judgments were once read as failures), that task's report is not."""
    from lifesearch_local.cli import main

    out = tmp_path / "judged"
    assert main(["judge", "--tasks", str(AGREE / "tasks.jsonl"), "--reports", str(AGREE / "reports.jsonl"),
                 "--model", "tiny-llama", "--out", str(out), "--task-ids", "t1", "--quiet"]) == 0
    assert "--task-ids: judging 1 of 2 tasks and their 6 of 12 reports" in capsys.readouterr().out
    assert not (out / "tasks.jsonl").exists()
    assert main(["report", str(out)]) == 2
    assert "incomplete run" in capsys.readouterr().err and not (out / "report.html").exists()
    assert main(["report", str(out), "--task-ids", "t1"]) == 0
    page = (out / "report.html").read_text()
    assert 'id="scores-tiny-llama-choice-' in page and "Mean [95% CI]" in page and 'id="missing-judgments"' not in page


def test_report_on_a_full_disk_leaves_no_temporary(tmp_path, capsys):
    """`report` on a real tmpfs with no room for report.html (no injection): one line naming it and
    "no space left on device", exit 1, no report.html.tmp; once space is freed it is written."""
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



def test_report_refuses_missing_judgments_unless_allowed_and_then_counts_them(tmp_path, capsys):
    from lifesearch_local.cli import main

    run = make_run_dir(tmp_path / "run", labels=False, extras=False)
    lines = (run / "judgments.jsonl").read_text().splitlines()
    # two decisions of judge const (first pass) never made
    dropped = [i for i, line in enumerate(lines) if '"judge": "const"' in line][:2]
    (run / "judgments.jsonl").write_text("".join(f"{line}\n" for i, line in enumerate(lines) if i not in dropped))
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert "incomplete run: 2 rubric(s)" in err and "--allow-missing" in err and not (run / "report.html").exists()
    assert main(["report", str(run), "--allow-missing"]) == 0
    page = (run / "report.html").read_text()
    note = page[page.index('id="missing-judgments"'):]
    assert "judge const: 2 rubric decision(s) were never judged" in note[:400]


def test_report_task_ids_keep_only_those_tasks_and_name_the_tasks_file(tmp_path, capsys):
    from lifesearch_local.cli import main

    run = make_run_dir(tmp_path / "run", labels=False, extras=False)
    assert main(["report", str(run), "--task-ids", "t2"]) == 0
    page = (run / "report.html").read_text()
    assert '<div class="card" data-key="tasks"><b>1</b>tasks' in page and '<div class="card" data-key="reports"><b>6</b>' in page
    assert main(["report", str(run), "--task-ids", "t2,t9"]) == 2
    assert f"1 id(s) not in the tasks file {run / 'tasks.jsonl'}: t9" in capsys.readouterr().err
    # judgments of a task the tasks file lacks: the error names that file, not scoring
    (run / "tasks.jsonl").write_text((run / "tasks.jsonl").read_text().splitlines()[0] + "\n")
    assert main(["report", str(run)]) == 2
    assert f"task(s) not in the tasks file {run / 'tasks.jsonl'}: t2" in capsys.readouterr().err
