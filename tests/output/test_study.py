"""The certify study's numbers as printed: signed points, intervals, and the PPI table's cells."""

from __future__ import annotations

import io

from lifesearch_local.output.study import plain_ci, points, points_ci, ppi_table, share_ci


def test_points_and_intervals():
    assert points(-0.04) == "+0.0" and points(3.25) == "+3.2" and points(-12.0) == "-12.0" and points(None) == "—"
    assert points_ci(4.0, [1.0, 7.5]) == "+4.0 [+1.0, +7.5]" and points_ci(4.0, None) == "+4.0 [—]"
    assert share_ci(0.8321, [0.79, 0.871]) == "83.2 [79.0, 87.1]" and share_ci(None, None) == "—"
    assert plain_ci(0.612, None) == "0.61 [—]"


def test_the_ppi_table_says_why_there_is_no_interval():
    agents = {"a": {"mean": 0.5, "ci95": [0.4, 0.6], "judge_only": 0.7, "labels_only": 0.45, "n_labelled_tasks": 30,
                    "n_unlabelled_tasks": 170, "lambda": 0.62},
              "b": {"mean": 0.3, "ci95": None, "judge_only": 0.3, "labels_only": 0.3, "n_labelled_tasks": 1,
                    "n_unlabelled_tasks": 199, "lambda": 0.0, "ci95_reason": "n=1 labelled task: no interval"}}
    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(ppi_table("j", agents))
    text = console.export_text()
    assert "50.0 [40.0, 60.0]" in text and "0.62" in text and "n=1 labelled task: no interval" in text
