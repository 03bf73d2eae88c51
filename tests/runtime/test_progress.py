"""The progress bar: a resumed stage starts at what an earlier run finished, and counts new work."""

from __future__ import annotations

from lifesearch_local.runtime.progress import progress_bar
from tests.helpers.terminal import Terminal


def test_the_bar_starts_at_what_was_done_and_counts_new_work(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the whole bar on one line, nothing elided
    monkeypatch.setattr("sys.stderr", err := Terminal())
    with progress_bar(4, desc="judge j", unit="decision", already=6) as bar:
        bar.advance(4)
    assert bar.done == 4  # the rates count new work only
    assert "judge j (6 already done)" in err.getvalue() and "10/10" in err.getvalue()
    monkeypatch.setattr("sys.stderr", err := Terminal())
    with progress_bar(3, desc="judge j", unit="decision") as bar:
        pass
    assert "already done" not in err.getvalue() and "0/3" in err.getvalue()
