"""A resumed stage's progress bar says how much an earlier run finished ("N already done"), not 0/N."""

from __future__ import annotations

import contextlib
import io

import pytest
from conftest import rubric, task, write_jsonl
from doubles import ScriptedBackend

from lifesearch_local.cli import main
from lifesearch_local.runtime.progress import progress_bar


class Terminal(io.StringIO):
    """stderr as a terminal, so that the bar is drawn (into this buffer)."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the whole bar on one line, nothing elided


def test_the_bar_starts_at_what_was_done_and_counts_new_work(monkeypatch):
    monkeypatch.setattr("sys.stderr", err := Terminal())
    with progress_bar(4, desc="judge j", unit="decision", already=6) as bar:
        bar.advance(4)
    assert bar.done == 4  # the rates count new work only
    assert "judge j (6 already done)" in err.getvalue() and "10/10" in err.getvalue()
    monkeypatch.setattr("sys.stderr", err := Terminal())
    with progress_bar(3, desc="judge j", unit="decision") as bar:
        pass
    assert "already done" not in err.getvalue() and "0/3" in err.getvalue()


def test_a_resumed_judge_says_how_many_decisions_were_already_made(tmp_path, monkeypatch):
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task(f"t{i}", [rubric(f"R{k}", 0.5) for k in range(4)]) for i in range(3)])
    reports = write_jsonl(tmp_path / "reports.jsonl", [{"task_id": f"t{i}", "agent": "a", "run": 0, "text": "Report."}
                                                       for i in range(3)])
    monkeypatch.setattr("lifesearch_local.runtime.skeleton.default_open",
                        lambda model, ray, name: contextlib.nullcontext(ScriptedBackend()))
    model = tmp_path / "judge-model"
    model.mkdir()
    argv = ["judge", "--tasks", str(tasks), "--reports", str(reports), "--model", str(model), "--out", str(tmp_path / "run")]
    assert main([*argv, "--limit", "1", "--quiet"]) == 0  # 4 decisions, then "killed"
    monkeypatch.setattr("sys.stderr", err := Terminal())
    assert main(argv) == 0
    assert "(4 already done)" in err.getvalue() and "12/12" in err.getvalue()
