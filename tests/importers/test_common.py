"""What every importer shares: the output directory written whole or not at all, even on a full disk or
after `kill -9`."""

from __future__ import annotations

import os
import subprocess
import sys

from lifesearch_local.cli import main
from lifesearch_local.importers.common import sweep_stale
from tests.helpers.diskfull import fill, small_tmpfs
from tests.helpers.drb2 import TASKS


def dead_pid() -> int:
    """The pid of a process that has exited (what a `kill -9`ed import leaves in its temporaries' names)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_killed_imports_temporaries_are_swept_by_the_next_import(tmp_path, capsys):
    out = tmp_path / "out"
    stale = tmp_path / f".out.tmp-{dead_pid()}-k9x2"  # what `kill -9` mid-write leaves
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "tasks.jsonl").write_text("half\n")
    live = tmp_path / f".out.tmp-{os.getpid()}-live"  # this very process: still writing
    live.mkdir()
    other = tmp_path / ".other.tmp-1-x"  # another output's: not ours to touch
    other.mkdir()
    assert main(["import", "drb2", "--tasks", str(TASKS), "--out", str(out)]) == 0
    assert not stale.exists() and live.is_dir() and other.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".other.tmp-1-x", live.name, "out"])


def test_an_output_moved_aside_by_a_killed_import_is_put_back(tmp_path):
    """A kill between the two renames of --force left the old output at .out.old-PID and no out/."""
    out = tmp_path / "out"
    aside = tmp_path / f".out.old-{dead_pid()}"
    aside.mkdir()
    (aside / "import.json").write_text("{}\n")
    assert sweep_stale(out) == []
    assert (out / "import.json").read_text() == "{}\n" and not aside.exists()


def test_import_on_a_full_disk_is_one_line_and_leaves_no_temporary(tmp_path, capsys):
    """`import drb2` onto a real tmpfs with no room left (no injection): exit 1, one line naming the
    output directory and "no space left on device", no .out.tmp-* directory left."""
    with small_tmpfs(tmp_path / "fs", 128) as fs:
        out = fs / "imported"
        filler = fill(fs)
        assert main(["import", "drb2", "--tasks", str(TASKS), "--out", str(out)]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {out}: no space left on device"), err
        assert sorted(p.name for p in fs.iterdir()) == ["filler.bin"]
        filler.unlink()
        assert main(["import", "drb2", "--tasks", str(TASKS), "--out", str(out)]) == 0
        assert (out / "tasks.jsonl").is_file() and sorted(p.name for p in fs.iterdir()) == ["imported"]
