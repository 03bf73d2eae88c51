"""The run directory's lock: one writer process at a time (flock on a plain file, never followed through a link)."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from lifesearch_local.errors import LifesearchError
from lifesearch_local.rundir.files import disk_full, is_disk_full
from serving import loads

LOCK_FILE = ".lifesearch.lock"

# Run directories this process holds, by resolved path: [lock fd, nesting depth]. A CLI command
# takes the lock for its whole life and the stages it calls take it again, so it is reentrant.
_HELD: dict[Path, list[int]] = {}
_HELD_GUARD = threading.Lock()


class RunDirBusy(LifesearchError):
    """Another process holds the run directory's lock."""


@contextlib.contextmanager
def hold(directory: Path, command: str | None = None) -> Iterator[None]:
    """Hold `directory`'s lock for this process (reentrant: a command holds it for its whole life
    and the stages it calls take it again); RunDirBusy if another process holds it."""
    key = directory.resolve()
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is None:
            held = _HELD[key] = [_acquire(key / LOCK_FILE, command or _default_command()), 0]
        held[1] += 1
    try:
        yield
    finally:
        with _HELD_GUARD:
            held[1] -= 1
            if not held[1]:
                del _HELD[key]
                os.close(held[0])  # releases the flock


def is_held(directory: Path) -> bool:
    """Whether this process holds `directory`'s lock."""
    return directory.resolve() in _HELD


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _acquire(path: Path, command: str) -> int:
    """Take the lock file's flock without waiting and write who holds it; RunDirBusy if taken.

    The kernel drops a flock with its process, so a lock left by a killed run is simply free:
    the pid in the file is only what the refusal message names.
    """
    try:  # O_NOFOLLOW: a lock file planted as a symlink must not make us truncate what it points at
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as e:
        if is_disk_full(e):
            raise disk_full(path) from None
        why = "is a symbolic link" if path.is_symlink() else (e.strerror or str(e))
        raise LifesearchError(f"{path}: the lock file {why}; remove it (a lock file is a plain file that "
                              "lifesearch creates) and rerun") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LifesearchError(f"{path}: the lock file is not a plain file; remove it and rerun")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise RunDirBusy(_busy_message(path.parent, holder)) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    try:
        os.pwrite(fd, (json.dumps({"pid": os.getpid(), "command": command, "since": _now()}) + "\n").encode(), 0)
    except OSError as e:  # the flock is the lock; on a full disk it holds without the holder's name
        if not is_disk_full(e):
            os.close(fd)
            raise
    return fd


def _holder(fd: int, tries: int = 20) -> str:
    """The holder's record; it is written just after the lock is taken, so a refusal that comes
    in between waits a moment (at most ~1 s) for it rather than name no pid."""
    text = ""
    for _ in range(tries):  # bounded
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        if text.endswith("\n"):
            return text
        time.sleep(0.05)
    return text


def _busy_message(where: Path, holder: str) -> str:
    try:
        info = loads(holder)  # bounded: the file is in a directory others may write
        who = f"pid {info['pid']}, `lifesearch {info.get('command') or '?'}` since {info.get('since', '?')}"
        stop = f"stop it (kill {info['pid']})"
    except (ValueError, TypeError, KeyError, AttributeError):  # the holder has not written its pid yet (or not JSON)
        who, stop = "pid unknown", "stop it"
    return (f"{where}: in use by another lifesearch process ({who}); one process writes a run directory "
            f"at a time: wait for it to finish, or {stop} and rerun this command")


def _default_command() -> str:
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    return args[0] if args else Path(sys.argv[0]).name
