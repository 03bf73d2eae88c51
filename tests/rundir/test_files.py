"""Writing a run directory's files: a planted symlink is refused (never followed), a full disk is one
error naming the path with nothing half-written left behind."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from lifesearch_local.errors import DiskFull
from lifesearch_local.rundir import files
from lifesearch_local.rundir.files import NotAPlainFile, append_bytes, cut_to, empty_file, write_atomic
from tests.helpers.diskfull import fill, small_tmpfs


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text("not yours\n")
    return path


@pytest.mark.parametrize("write", [
    lambda p: append_bytes(p, b'{"a":1}\n'),
    lambda p: write_atomic(p, "{}\n"),
    lambda p: empty_file(p),
    lambda p: cut_to(p, 0),
], ids=["append", "atomic", "empty", "cut"])
def test_every_writer_refuses_a_symlink_and_leaves_its_target_alone(tmp_path, victim, write):
    link = tmp_path / "run" / "judgments.jsonl"
    link.parent.mkdir()
    link.symlink_to(victim)
    with pytest.raises(NotAPlainFile, match="is a symbolic link"):
        write(link)
    assert victim.read_text() == "not yours\n" and link.is_symlink()
    assert not files.temp_path(link).exists()


def test_a_dangling_symlink_is_not_created_through(tmp_path):
    target = tmp_path / "elsewhere.jsonl"
    link = tmp_path / "manifest.json"
    link.symlink_to(target)
    for write in (lambda: append_bytes(link, b"x\n"), lambda: write_atomic(link, "x")):
        with pytest.raises(NotAPlainFile):
            write()
    assert not target.exists()


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "judgments.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(NotAPlainFile, match="not a plain file"):
        append_bytes(fifo, b"x\n")


def _enospc_after(limit: int, monkeypatch) -> None:
    """os.write writes `limit` bytes in all, then fails as a full disk does (injected at the write call)."""
    real, left = os.write, [limit]

    def write(fd, data):
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = real(fd, bytes(data)[:left[0]])
        left[0] -= n
        return n

    monkeypatch.setattr(files.os, "write", write)


def test_append_on_a_full_disk_is_cut_back_and_named(tmp_path, monkeypatch):
    """ENOSPC injected at os.write, after half of the new line went out: the half line is cut away."""
    path = tmp_path / "judgments.jsonl"
    path.write_bytes(b'{"old":1}\n')
    _enospc_after(5, monkeypatch)
    with pytest.raises(DiskFull) as exc:
        append_bytes(path, b'{"new":2}\n')
    assert str(exc.value).startswith(f"{path}: no space left on device")
    assert exc.value.exit_code == 1
    assert path.read_bytes() == b'{"old":1}\n'


def test_atomic_write_on_a_full_disk_keeps_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    """ENOSPC injected at os.write of the temporary: the old manifest stays, manifest.json.tmp is gone."""
    path = tmp_path / "manifest.json"
    path.write_text('{"old": true}\n')
    _enospc_after(3, monkeypatch)
    with pytest.raises(DiskFull, match="manifest.json: no space left on device"):
        write_atomic(path, '{"new": true}\n' * 100)
    assert path.read_text() == '{"old": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


def test_a_stale_temporary_from_a_killed_writer_is_replaced(tmp_path):
    path = tmp_path / "scores.json"
    files.temp_path(path).write_text("half of a killed write")
    write_atomic(path, "{}\n")
    assert path.read_text() == "{}\n" and not files.temp_path(path).exists()


def test_on_a_real_full_tmpfs(tmp_path):
    """A real tmpfs filled up (no injection): the append fails whole, the atomic write leaves no
    temporary, and both succeed once space is freed."""
    with small_tmpfs(tmp_path / "fs", 64) as fs:
        log = fs / "judgments.jsonl"
        append_bytes(log, b'{"n":0}\n')
        filler = fill(fs)
        line = b'{"n":1,"pad":"' + b"x" * 9000 + b'"}\n'  # more than the page the file already has
        with pytest.raises(DiskFull, match="judgments.jsonl: no space left on device"):
            append_bytes(log, line)
        assert log.read_bytes() == b'{"n":0}\n'
        with pytest.raises(DiskFull, match="manifest.json: no space left on device"):
            write_atomic(fs / "manifest.json", "{}\n" * 5000)
        assert sorted(p.name for p in fs.iterdir()) == ["filler.bin", "judgments.jsonl"]
        filler.unlink()
        append_bytes(log, line)
        write_atomic(fs / "manifest.json", "{}\n")
        assert log.read_bytes() == b'{"n":0}\n' + line
