"""The HTML run report: one self-contained page (inline CSS and SVG, no network at view time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lifesearch_local.rundir.files import write_output

REPORT_NAME = "report.html"


def render_report(run_dir: Path, labels_path: Path | None = None, **inputs: Any) -> str:
    """The report page of a run directory, as a string (`inputs`: tasks_path, reports_path,
    allow_missing, task_ids: see `data.load_run`)."""
    from lifesearch_local.output.report.data import load_run
    from lifesearch_local.output.report.html import render

    return render(load_run(Path(run_dir), labels_path, **inputs))


def write_report(run_dir: Path, labels_path: Path | None = None, out: Path | None = None, **inputs: Any) -> Path:
    """Write `RUN_DIR/report.html` (or `out`) atomically and return its path.

    Labels come from `labels_path`, else `RUN_DIR/labels.jsonl`, else the labels file the
    manifest records; tasks and reports likewise (`inputs`: tasks_path, reports_path, allow_missing, task_ids).
    """
    run_dir = Path(run_dir)
    page = render_report(run_dir, labels_path, **inputs)
    target = Path(out) if out is not None else run_dir / REPORT_NAME
    write_output(target, page)
    return target
