"""What the report reads: fetch failures from step logs, and tasks and reports found through the manifest."""

from __future__ import annotations

import re
import shutil

import pytest

from lifesearch_local.output.report import write_report
from lifesearch_local.output.report.data import fetch_stats
from lifesearch_local.records import Report
from lifesearch_local.rundir.jsonl import read_records
from tests.helpers.report_runs import make_run_dir


def test_fetch_stats_from_step_logs(tmp_path):
    run = make_run_dir(tmp_path / "run")
    stats = fetch_stats(run, read_records(run / "reports.jsonl", Report))
    assert stats["alpha"].calls == 2 and dict(stats["alpha"].failures) == {"timeout": 1}
    assert stats["beta"].calls == 1 and dict(stats["beta"].failures) == {"paywall": 1}
    assert stats["beta"].unreadable_lines == 1
    assert fetch_stats(tmp_path / "nowhere", []) == {}


def test_report_on_a_judge_out_directory(tmp_path, capsys):
    """`judge --out DIR` keeps judgments and a manifest; the report finds tasks and reports through
    the paths the manifest records (their hashes checked), or through --tasks / --reports."""
    from lifesearch_local.cli import main
    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.rundir.directory import open_run

    inputs = make_run_dir(tmp_path / "inputs", labels=False, extras=False)
    out = tmp_path / "judged"
    out.mkdir()
    shutil.copy(inputs / "judgments.jsonl", out / "judgments.jsonl")
    with pytest.raises(LifesearchError, match="no tasks.jsonl.*pass --tasks"):
        write_report(out)
    assert main(["report", str(out), "--tasks", str(inputs / "tasks.jsonl")]) == 0
    assert 'id="scores-choice-a"' in (out / "report.html").read_text()
    # what judge / sweep / reporteval record
    with open_run(out, "judge", inputs={"tasks": inputs / "tasks.jsonl", "reports": inputs / "reports.jsonl"}):
        pass
    page = write_report(out).read_text()
    assert 'id="scores-choice-a"' in page and 'id="chart-scatter"' in page  # reports found: output tokens
    (inputs / "tasks.jsonl").write_text((inputs / "tasks.jsonl").read_text() + "\n")
    with pytest.raises(LifesearchError, match="changed since"):
        write_report(out)


def test_missing_judgments_are_refused_as_score_refuses_them_unless_allowed(tmp_path):
    """Found in use: `report` on a partial DRB II judge run counted 9,376 missing judgments as failures."""
    from lifesearch_local.errors import IncompleteRunError
    from lifesearch_local.output.report.data import load_run

    run = make_run_dir(tmp_path / "run", labels=False, extras=False)
    lines = (run / "judgments.jsonl").read_text().splitlines(keepends=True)
    (run / "judgments.jsonl").write_text("".join(lines[1:]))  # choice-a never judged alpha's t1 r1
    with pytest.raises(IncompleteRunError, match=rf"^{run}: incomplete run: 1 rubric\(s\) of agent 'alpha'"):
        load_run(run)
    data = load_run(run, allow_missing=True)
    assert data.scores["choice-a"]["alpha"].missing == 1
    page = write_report(run, allow_missing=True).read_text()
    assert 'id="missing-judgments"' in page and "judge choice-a: 1 rubric decision(s) were never judged" in page


def test_a_step_log_line_nested_deep_or_not_utf8_is_counted_unreadable(tmp_path):
    run = make_run_dir(tmp_path / "run")
    with open(run / "trajectories" / "alpha" / "t1_0.jsonl", "ab") as f:
        f.write(b"[" * 100_000 + b"]" * 100_000 + b"\n" + b'{"tool": "web_fetch", "x": "\xff"}\n')
    stats = fetch_stats(run, read_records(run / "reports.jsonl", Report))
    assert stats["alpha"].unreadable_lines == 2 and stats["alpha"].calls == 2


@pytest.mark.parametrize("text, message", [
    (b'{"j": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "reporteval_summary.json: JSON nested deeper than 64 levels"),
    (b'{"j": {"alpha": {"quality": {"overall": "high"}}}}', r"reporteval_summary.json: j.alpha.quality.overall: "),
    (b'{"j": ["alpha"]}', r"reporteval_summary.json: j: "),
])
def test_a_damaged_reporteval_summary_is_one_located_error(tmp_path, capsys, text, message):
    from lifesearch_local.cli import main

    run = make_run_dir(tmp_path / "run")
    (run / "reporteval_summary.json").write_bytes(text)
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(message, err), err
