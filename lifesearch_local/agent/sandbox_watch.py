"""Per-call limits of the python tool's sandbox that rlimits cannot give: the call's cgroup, its watcher, its trees.

Standard library only: the sandbox runner loads this file by path (as it does sandbox_kernel).
rlimits are per process; a call is a tree of processes. Where the harness could create a cgroup v2
for the call, the kernel caps the tree's memory and process count. Elsewhere the process that waits
for the snippet (the PID namespace's init, or the subreaper) measures what the call's processes
hold together, and the bytes its scratch directory holds when that is not a size-capped tmpfs,
and ends the call past a limit. It measures more often the closer the call is to a limit.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import select
import signal
import time
from collections.abc import Callable, Iterable

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FASTEST_S, SLOWEST_S = 0.005, 0.1  # between two measurements
GROWTH = 2 << 30  # bytes/s a call is assumed able to grow at least (faster when measured faster)
INODE_BYTES = 4096  # what an entry of the scratch tree counts at least (empty files are not free)
PR_SET_DUMPABLE = 4


# --- a tree of any depth ------------------------------------------------------------------------
def walk_tree(parent: int, top: str, on_entry: Callable[[int, os.DirEntry], None],
              on_leave: Callable[[int, str], None], open_up: bool = False) -> None:
    """Visit every entry beneath `parent`/`top` without recursion, at any depth (past PATH_MAX too),
    never following a symlink and holding two descriptors at a time. `on_entry(dir_fd, entry)` sees
    each non-directory; `on_leave(parent_fd, name)` each directory, after everything inside it.
    `open_up`: a directory without read or search permission is chmod-ed 0700 (else: an error)."""
    fd = _open_dir(parent, top, open_up)
    stack = [(top, _identity(fd), _entries(fd, on_entry))]
    while True:
        pending = stack[-1][2]
        if pending:
            name = pending.pop()
            child = _open_dir(fd, name, open_up)
            os.close(fd)
            fd = child
            stack.append((name, _identity(fd), _entries(fd, on_entry)))
            continue
        name = stack.pop()[0]
        if not stack:
            os.close(fd)
            on_leave(parent, name)
            return
        up = os.open("..", _DIR, dir_fd=fd)
        os.close(fd)
        fd = up
        if _identity(fd) != stack[-1][1]:  # renamed under us: '..' is no longer where we came from
            os.close(fd)
            raise OSError(errno.ESTALE, f"a directory moved during the walk: {name}")
        on_leave(fd, name)


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _open_dir(parent: int, name: str, open_up: bool) -> int:
    try:
        return os.open(name, _DIR, dir_fd=parent)
    except PermissionError:
        if not open_up:
            raise
        os.chmod(name, 0o700, dir_fd=parent)
        return os.open(name, _DIR, dir_fd=parent)


def _entries(fd: int, on_entry: Callable[[int, os.DirEntry], None]) -> list[str]:
    """Call on_entry for every non-directory in `fd`; return the names of its subdirectories."""
    subdirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
            else:
                on_entry(fd, entry)
    return subdirs


class _Enough(Exception):
    """The tree already holds more than the cap: no need to measure the rest."""


def tree_bytes(path: str, cap: int) -> int:
    """Bytes the tree at `path` holds on disk (each entry at least INODE_BYTES), stopping past `cap`."""
    total = 0

    def count(st_size: int) -> None:
        nonlocal total
        total += max(st_size, INODE_BYTES)
        if total > cap:
            raise _Enough

    parent = os.open(os.path.dirname(path), _DIR)
    try:
        walk_tree(parent, os.path.basename(path), lambda _, e: count(e.stat(follow_symlinks=False).st_blocks * 512),
                  lambda fd, name: count(os.stat(name, dir_fd=fd, follow_symlinks=False).st_blocks * 512))
    except _Enough:
        pass
    except OSError:  # changed while measured: what was counted stands until the next measurement
        pass
    finally:
        os.close(parent)
    return total


# --- the call's processes -----------------------------------------------------------------------
def _proc(path: str) -> bytes:
    """A small /proc file (os.read: a third cheaper than open(), and this runs every few ms)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def memory_of(pid: int) -> int:
    """Resident anonymous and shared-memory bytes of a process (0 once it is gone)."""
    try:
        text = _proc(f"/proc/{pid}/status")
    except OSError:
        return 0
    kb = 0
    for line in text.splitlines():
        if line.startswith((b"RssAnon:", b"RssShmem:")):
            kb += int(line.split()[1])
    return kb << 10


def this_pid() -> int:
    """This process's pid as the mounted /proc numbers it (a PID namespace's init is 1 only in its own)."""
    return int(os.readlink("/proc/self"))


def descendants(root: int) -> set[int]:
    """Every process below `root` (from each process's parent in /proc)."""
    parents = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            parents[int(pid)] = int(_proc(f"/proc/{pid}/stat").rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    tree, frontier = set(), {root}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - tree
        tree |= frontier
    return tree


def kill_descendants(rounds: int = 500) -> None:
    """SIGKILL every descendant and reap it, until this process has no child left (bounded)."""
    for _ in range(rounds):
        for pid in descendants(os.getpid()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return  # no child left: with a subreaper, no descendant either
        time.sleep(0.002)


def tasks_of_uid(uid: int) -> int:
    """Threads (tasks) owned by `uid`: RLIMIT_NPROC counts them all, not only ours."""
    n = 0
    if not os.path.isdir("/proc"):
        return n
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    n += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                continue
    return n


# --- the call's cgroup and its watcher ----------------------------------------------------------
def join_cgroup(spec: dict) -> dict:
    """Move this process (and so everything it starts) into the call's cgroup v2, if the harness made one."""
    path = spec.get("cgroup")
    if not path:
        return {}
    try:
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write("0")
    except OSError as e:
        return {"cgroup_error": f"{path}: {e.strerror or e}"}
    return {"memory": "cgroup2", "pids": "cgroup2"}


class _Gauge:
    """One measured limit: what the call holds, and how fast that grew since the last measurement."""

    def __init__(self, what: str, cap: int, measure: Callable[[], int]):
        self.what, self.cap, self.measure = what, cap, measure
        self.used, self.rate, self.when = 0, 0.0, 0.0

    def read(self) -> int:
        now, used = time.monotonic(), self.measure()
        if self.when:
            self.rate = max(0.0, (used - self.used) / max(now - self.when, 1e-6))
        self.used, self.when = used, now
        return used

    def pause(self) -> float:
        """Time to the cap at twice the last growth (at least GROWTH): measure again before it."""
        return (self.cap - self.used) / max(GROWTH, 2 * self.rate)


def watch(child: int, spec: dict, layers: dict, processes: Callable[[], Iterable[int]],
          kill: Callable[[], None]) -> int:
    """Wait for the snippet's process `child` (reaping every orphan) and return its exit status;
    meanwhile measure what no kernel caps for this call (layers' `memory`/`scratch` say `watch`)
    and, past a limit, kill the call's processes, send the event down the audit channel and
    return 137. The audit descriptor stays open here for that; nothing in the snippet holds it."""
    gauges = []
    if layers.get("memory") == "rss-watch":
        gauges.append(_Gauge("memory_limit", spec["memory_mb"] << 20, lambda: sum(map(memory_of, processes()))))
    if layers.get("scratch") == "watch":
        cap = spec["scratch_mb"] << 20
        gauges.append(_Gauge("scratch_limit", cap, lambda: tree_bytes(spec["workdir"], cap)))
    # not dumpable: a snippet of the same uid (weak mode) cannot open /proc/<this>/fd/<audit fd>
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    exited = _exit_fd(child)
    while True:
        status = _reaped(child, block=not gauges)
        if status is not None:
            return status
        t0 = time.monotonic()
        for gauge in gauges:
            if gauge.read() > gauge.cap:
                return _over(kill, spec, gauge.what, gauge.used, gauge.cap)
        took = time.monotonic() - t0  # measuring takes at most a third of a core
        pause = min(SLOWEST_S, max(FASTEST_S, 2 * took, min(g.pause() for g in gauges)))
        if exited is None:
            time.sleep(pause)
        else:  # woken as soon as the snippet's process ends: the call is not made longer by a pause
            select.select([exited], [], [], pause)


def _exit_fd(pid: int) -> int | None:
    """A descriptor that turns readable when `pid` exits (a pidfd, Linux 5.3+), else None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _reaped(child: int, block: bool) -> int | None:
    """Reap whatever has exited; the exit status of `child` once it has (128 + signal when killed)."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return 1  # the child was reaped elsewhere: nothing left to wait for
        if pid == child:
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        if pid == 0:
            return None


def _over(kill: Callable[[], None], spec: dict, what: str, used: int, cap: int) -> int:
    kill()
    event = {"killed": what, "by": "watch", "held_mb": round(used / (1 << 20), 1), "limit_mb": cap >> 20}
    with contextlib.suppress(OSError, KeyError, TypeError):
        os.write(spec["audit_fd"], (json.dumps(event) + "\n").encode())
    return 128 + signal.SIGKILL
