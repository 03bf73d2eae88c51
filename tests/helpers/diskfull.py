"""A real filesystem that fills up: a small tmpfs (mounting needs root), for the disk-full tests."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

PAGE = 4096


@contextlib.contextmanager
def small_tmpfs(where: Path, size_kb: int = 256) -> Iterator[Path]:
    """A tmpfs of `size_kb` KiB mounted at `where` for the block; skips where it cannot be mounted (not
    root, no mount(8)): the tests that inject ENOSPC at the write call still cover those paths there."""
    where.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k,mode=0755", "tmpfs", str(where)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"no tmpfs to fill here ({e})")
    if done.returncode:
        pytest.skip(f"no tmpfs to fill here ({done.stderr.strip() or done.returncode})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def free_bytes(where: Path) -> int:
    st = os.statvfs(where)
    return st.f_bavail * st.f_frsize


def fill(where: Path, leave: int = 0) -> Path:
    """Fill the filesystem holding `where` with one file, leaving about `leave` bytes (whole pages) free."""
    filler = where / "filler.bin"
    want = max(0, free_bytes(where) - leave)
    with open(filler, "ab") as f:
        try:
            f.write(b"\0" * want)
            f.flush()
            os.fsync(f.fileno())
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
    return filler
