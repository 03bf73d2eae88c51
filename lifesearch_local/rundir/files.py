"""How every file of a run directory is written: no symlink followed, a full disk as one line, no temporaries left.

The lock file's rule for every file we write: a name planted as a symbolic link (`x/judgments.jsonl
-> /some/file`) would make an append or a truncate land on whatever it points at, so each file is
opened with O_NOFOLLOW and must be a plain file. A write that finds the disk full (ENOSPC, or a
quota: EDQUOT) is undone (an append is cut back to where it began, a temporary is removed) and
raised as `DiskFull` naming the path: what was written before stays whole, so the same command
resumes once space is freed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from lifesearch_local.errors import DiskFull, LifesearchError

_FULL = (errno.ENOSPC, errno.EDQUOT)
TMP_SUFFIX = ".tmp"


def is_disk_full(err: BaseException) -> bool:
    """Whether `err` says the filesystem (or the user's quota) has no room left."""
    return isinstance(err, OSError) and err.errno in _FULL


def disk_full(path: str | Path) -> DiskFull:
    return DiskFull(f"{path}: no space left on device; free some space and rerun the same command "
                    "(what was written before is kept)")


@contextlib.contextmanager
def full_disk_as_error(path: str | Path) -> Iterator[None]:
    """Within the block, an OSError saying the disk is full becomes `DiskFull` naming `path`."""
    try:
        yield
    except OSError as e:
        if is_disk_full(e):
            raise disk_full(path) from None
        raise


class NotAPlainFile(LifesearchError):
    """A file lifesearch writes is a symbolic link, a FIFO, a device or a directory: refused, never followed."""


def _refusal(path: Path, what: str) -> NotAPlainFile:
    return NotAPlainFile(f"{path}: {what}; lifesearch writes only plain files it creates itself, and never "
                         "follows a link there: remove it (or choose another directory) and rerun")


def open_plain(path: str | Path, flags: int, mode: int = 0o644) -> int:
    """A descriptor of `path` opened with `flags` plus O_NOFOLLOW (and O_NONBLOCK, so that a FIFO
    planted there cannot block us): NotAPlainFile when it is a symbolic link or not a plain file."""
    path = Path(path)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == errno.ELOOP or path.is_symlink():
            raise _refusal(path, "is a symbolic link") from None
        if e.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO without a reader, a directory
            raise _refusal(path, "is not a plain file") from None
        if is_disk_full(e):
            raise disk_full(path) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _refusal(path, f"is not a plain file (mode {stat.filemode(st.st_mode)})")
    return fd


def refuse_link(path: str | Path) -> None:
    """NotAPlainFile when `path` exists as anything but a plain file (a symbolic link above all):
    what a writer checks before it reads a file it is about to write."""
    path = Path(path)
    if path.is_symlink():
        raise _refusal(path, "is a symbolic link")
    if path.exists() and not path.is_file():
        raise _refusal(path, "is not a plain file")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def append_bytes(path: str | Path, data: bytes) -> None:
    """Append `data` with one write() on an O_APPEND descriptor, then fsync. On a full disk the
    file is cut back to its length before the write (no torn line stays) and `DiskFull` is raised."""
    if not data:
        return
    fd = open_plain(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        start = os.fstat(fd).st_size
        try:
            _write_all(fd, data)
            os.fsync(fd)
        except OSError as e:
            if not is_disk_full(e):
                raise
            with contextlib.suppress(OSError):  # cutting back frees space; it does not need any
                os.ftruncate(fd, start)
            raise disk_full(path) from None
    finally:
        os.close(fd)


def temp_path(path: str | Path) -> Path:
    """The temporary beside `path` that `write_atomic` renames over it."""
    path = Path(path)
    return path.with_name(path.name + TMP_SUFFIX)


def write_atomic(path: str | Path, data: bytes | str) -> None:
    """Replace `path`'s content all at once: a temporary beside it (created afresh, never through
    a link), fsynced, renamed over it. A symbolic link at `path` is refused; on a full disk the
    temporary is removed and `DiskFull` is raised (the old content stays)."""
    path = Path(path)
    refuse_link(path)
    tmp = temp_path(path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # left by a killed writer (the run directory's lock says no one else writes it)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd = open_plain(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        try:
            _write_all(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if is_disk_full(e):
            raise disk_full(path) from None
        raise


def write_output(path: str | Path, data: bytes | str) -> None:
    """`write_atomic` for a file the user named (`--out`, `--html`): its folder missing, not
    writable or read-only is one line naming the path, as a full disk and a link there are."""
    try:
        write_atomic(path, data)
    except OSError as e:
        raise LifesearchError(f"{path}: cannot be written ({e.strerror or e}); choose another path") from None


def empty_file(path: str | Path) -> None:
    """Create `path` empty, or cut it to nothing (never through a link)."""
    fd = open_plain(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.close(fd)


def cut_to(path: str | Path, size: int) -> None:
    """Cut `path` to `size` bytes (a torn last line), never through a link."""
    fd = open_plain(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)
