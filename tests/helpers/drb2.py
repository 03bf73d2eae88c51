"""The DeepResearch Bench II import fixtures (tasks, reports, evaluator results) and the command that imports them."""

from __future__ import annotations

import json
from pathlib import Path

from lifesearch_local.cli import main
from tests.helpers.inputs import FIXTURES

FIX = FIXTURES / "import"
TASKS, RESULTS, REPORTS = FIX / "drb2_tasks.jsonl", FIX / "drb2_results.jsonl", FIX / "drb2_reports"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def run_import(out: Path, *extra: str) -> Path:
    assert main(["import", "drb2", "--tasks", str(TASKS), "--reports", str(REPORTS), "--results", str(RESULTS),
                 "--out", str(out), *extra]) == 0
    return out


def published_dir() -> Path:
    """The upstream evaluator's published per-task scores (../shared/external/deep_research_bench_2/results, or
    $LIFESEARCH_DRB2_DIR/results); tests that need them skip where they are absent."""
    import os

    from tests.helpers.inputs import ROOT

    return Path(os.environ.get("LIFESEARCH_DRB2_DIR") or ROOT.parent / "shared/external/deep_research_bench_2") / "results"
