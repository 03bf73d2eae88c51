"""Terminal tables: their width from COLUMNS or the terminal, names whole when piped or with --wide."""

from __future__ import annotations

import re

import pytest

from lifesearch_local.analysis.scoring import AgentScore
from lifesearch_local.output import terminal
from lifesearch_local.output.terminal import console, score_table

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LONG = "sample-the-very-long-agent-name-of-a-real-run-" + "x" * 120  # 166 characters


def table_text(out) -> str:
    rows = {LONG: AgentScore(LONG, {0: 0.5}, 0.5, None, {"policy": 0.5}, {"t1": 0.5})}
    with out.capture() as cap:
        out.print(score_table(rows, title="scores"))
    return cap.get()


@pytest.mark.parametrize("columns", ["80", None])
def test_piped_output_keeps_every_name_whole(monkeypatch, columns):
    """Piped (a log, Slurm's output) the width was fixed at 160 columns, cutting names ("sample-th…");
    a COLUMNS inherited from the launching shell does not cut them either."""
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    if columns:
        monkeypatch.setenv("COLUMNS", columns)
    out = console()
    assert not out.is_terminal
    text = table_text(out)
    assert LONG in text and "…" not in text


def test_a_terminal_s_width_comes_from_columns(monkeypatch):
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich: treat stdout as a terminal
    monkeypatch.setenv("COLUMNS", "100")
    out = console()
    assert out.is_terminal and out.width == 100
    assert max(len(line) for line in ANSI.sub("", table_text(out)).splitlines()) <= 100


@pytest.mark.parametrize("columns", ["100", None])
def test_wide_ignores_the_width(monkeypatch, columns):
    if columns:
        monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setattr(terminal, "WIDE", True)
    text = table_text(console())
    assert LONG in text and "…" not in text


def test_the_wide_option_of_a_command_reaches_the_tables(monkeypatch, capsys):
    """`score --wide` with a narrow COLUMNS: full names; the next command without it is narrow again."""
    from tests.helpers.cli import run_cli
    from tests.helpers.inputs import AGREE

    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("COLUMNS", "60")
    argv = ["score", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl"),
            "--resamples", "100"]
    _, wide, _ = run_cli([*argv, "--wide"], capsys)
    _, narrow, _ = run_cli(argv, capsys)
    rows = [line for line in ANSI.sub("", narrow).splitlines() if line[:1] in "┏┃┡│└"]
    assert "Out tok (k)" in wide and rows and max(len(line) for line in rows) <= 60
