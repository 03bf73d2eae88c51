"""`lifesearch import …` arguments refused before any file is read."""

from __future__ import annotations

import pytest

from tests.helpers.cli import run_cli


@pytest.mark.parametrize("kind", ["drb2", "reports"])
@pytest.mark.parametrize("value", ["-5", "-1"])
def test_a_negative_max_chars_is_refused(tmp_path, capsys, kind, value):
    """`--max-chars -5` cut five characters off the end of every report (text[:-5]) and left one empty."""
    args = (["import", "drb2", "--tasks", str(tmp_path / "t.jsonl")] if kind == "drb2" else
            ["import", "reports", "--dir", str(tmp_path), "--agent", "a"])
    with pytest.raises(SystemExit) as e:
        run_cli([*args, "--max-chars", value, "--out", str(tmp_path / "out")], capsys)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--max-chars" in err and "must be at least 0" in err
