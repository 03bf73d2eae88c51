"""Running `lifesearch` as a user does: in this process or in a fresh one, with what it printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lifesearch_local.cli import main
from tests.helpers.inputs import ROOT


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    """`lifesearch ARGS` in this process: exit code, stdout, stderr."""
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def judge_sample_args(out: Path, *extra: str) -> list[str]:
    """`judge` of the first sample task's reports into `out`, quietly."""
    return ["judge", "--tasks", str(ROOT / "data/sample/tasks.jsonl"), "--reports",
            str(ROOT / "data/sample/reports.jsonl"), "--out", str(out), "--quiet", "--limit", "1", *extra]


def cli_process(args: list[str]) -> subprocess.CompletedProcess:
    """`lifesearch ARGS` in a fresh process, from the repository root."""
    return subprocess.run([sys.executable, "-m", "lifesearch_local", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)



def cli_out(capsys, *argv: str) -> str:
    """What `lifesearch ARGV` printed to stdout in this process (it must succeed)."""
    assert main(list(argv)) == 0
    return capsys.readouterr().out
