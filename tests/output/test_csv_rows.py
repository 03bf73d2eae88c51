"""CSV rows: text cells a spreadsheet would run as formulas are neutralised, numbers stay numbers, and a
line break in a cell is quoted."""

from __future__ import annotations

import csv
import io

import pytest

from lifesearch_local.output.csv_rows import safe_cell, to_csv

HOSTILE = ["=cmd|' /C calc'!A0", "+1+2", "-2+3", "@SUM(A1:A9)", "\t=1+1", "\r=1+1", "=HYPERLINK(\"http://x\")"]


def read(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


@pytest.mark.parametrize("cell", HOSTILE)
def test_a_formula_cell_gets_a_leading_quote(cell):
    rows = read(to_csv(("agent", "value"), [{"agent": cell, "value": 0.5}]))
    assert rows == [["agent", "value"], ["'" + cell, "0.5"]]


@pytest.mark.parametrize(("value", "written"), [(-1.5, "-1.5"), (-3, "-3"), ("-0.25", "-0.25"), ("+2e-3", "+2e-3"),
                                                ("1-800-FLOWERS", "1-800-FLOWERS"), ("a=b", "a=b"), (None, "")])
def test_numbers_and_harmless_text_stay_as_they_are(value, written):
    assert read(to_csv(("x",), [{"x": value}]))[1] == [written]


def test_safe_cell_leaves_non_text_alone():
    assert safe_cell(-2) == -2 and safe_cell(-0.5) == -0.5 and safe_cell(None) is None


def test_a_carriage_return_in_a_cell_does_not_split_the_row():
    text = to_csv(("task_id", "reason", "p"), [{"task_id": "t1", "reason": "line one\rline two\nthree", "p": 0.1},
                                                {"task_id": "t2", "reason": "ok", "p": 0.2}])
    assert text.count("\n") == 4  # header, two rows, the \n inside the quoted reason
    assert text.endswith("t2,ok,0.2\n") and "\r\n" not in text
    assert read(text) == [["task_id", "reason", "p"], ["t1", "line one\rline two\nthree", "0.1"], ["t2", "ok", "0.2"]]
