"""The python tool's host side of a call: its cgroup, its audit channel, and removing its scratch tree."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

from lifesearch_local.agent.sandbox_watch import walk_tree

log = logging.getLogger(__name__)
CGROUP_PREFIX = "lifesearch-py-"
AUDIT_MAX_BYTES = 1 << 16  # the record and a few events; anything longer is not the runner's
RUNNER_TASKS = 3  # the runner, the PID namespace's init (or the subreaper's child) and the snippet


# --- removing a tree of any depth --------------------------------------------------------------
def remove_tree(path: str | os.PathLike) -> None:
    """Delete `path` and everything beneath it: no recursion, no symlink followed, any depth (paths
    past PATH_MAX included). A snippet's tree: a directory it made unreadable or unwritable is
    opened up first (as its owner may)."""
    path = os.path.abspath(os.fspath(path))
    parent = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        walk_tree(parent, os.path.basename(path), lambda fd, entry: _writable(fd, os.unlink, entry.name),
                  lambda fd, name: _writable(fd, os.rmdir, name), open_up=True)
    finally:
        os.close(parent)


def _writable(dir_fd: int, remove, name: str) -> None:
    try:
        remove(name, dir_fd=dir_fd)
    except PermissionError:
        os.fchmod(dir_fd, 0o700)  # removing needs write and search permission on the directory
        remove(name, dir_fd=dir_fd)


# --- the audit channel -------------------------------------------------------------------------
def read_audit(fd: int) -> dict[str, Any]:
    """The runner's record, with a watcher's kill event (if any) under `killed`.

    The descriptor is a pipe only the runner's own processes hold, never the snippet's: nothing the
    snippet prints can change it. Read once every process of the call is gone (non-blocking).
    """
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(BlockingIOError):
        while len(data) < AUDIT_MAX_BYTES and (chunk := os.read(fd, AUDIT_MAX_BYTES)):
            data += chunk
    record: dict[str, Any] = {}
    killed = None
    for line in data.splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict) and "killed" in item:
                killed = killed or item
            elif isinstance(item, dict):
                record = item
    return {**record, "killed": killed} if killed else record


# --- a cgroup v2 per call ----------------------------------------------------------------------
def _own_cgroup() -> Path | None:
    """This process's cgroup v2 directory, where a cgroup2 file system is mounted."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    rel = next((line[3:] for line in lines if line.startswith("0::")), None)
    for mount in mounts:
        fields = mount.split(" - ", 1)
        if rel is not None and len(fields) == 2 and fields[1].split()[0] == "cgroup2":
            root, point = fields[0].split()[3:5]
            if rel == root or rel.startswith(root.rstrip("/") + "/"):
                return Path(point + "/" + rel[len(root):].lstrip("/"))
    return None


def call_cgroup(memory_mb: int, max_procs: int, base: Path | None = None) -> tuple[Path | None, str]:
    """A fresh cgroup v2 beneath this process's own, with memory.max and pids.max for one call.

    Returns (its path, "") or (None, why not). Only where this process's cgroup already hands the
    memory and pids controllers to its children and lets it create one (a delegated cgroup, or the
    root one as root); elsewhere the runner falls back to watching the call's memory itself.
    """
    parent = base if base is not None else _own_cgroup()
    if parent is None:
        return None, "no cgroup v2 here"
    try:
        enabled = (parent / "cgroup.subtree_control").read_text().split()
        if not {"memory", "pids"} <= set(enabled):  # enabling them would reorganise the host's cgroups
            return None, f"cgroup v2 {parent}: memory and pids not delegated to children"
        path = parent / f"{CGROUP_PREFIX}{uuid.uuid4().hex[:12]}"
        path.mkdir(mode=0o755)
    except OSError as e:
        return None, f"cgroup v2 {parent}: {e.strerror or e}"
    try:
        (path / "memory.max").write_text(str(memory_mb << 20))
        (path / "pids.max").write_text(str(max_procs + RUNNER_TASKS))
        with contextlib.suppress(FileNotFoundError):  # swap accounting may be off
            (path / "memory.swap.max").write_text("0")
        with contextlib.suppress(FileNotFoundError):  # the call dies as one on an OOM (kernel 4.19+)
            (path / "memory.oom.group").write_text("1")
    except OSError as e:
        drop_cgroup(path)
        return None, f"cgroup v2 {path}: {e.strerror or e}"
    return path, ""


def cgroup_killed(path: Path) -> dict[str, Any] | None:
    """The kill event of a call whose cgroup hit memory.max (the kernel's OOM killer ran in it)."""
    events = _counters(path / "memory.events")
    if events.get("oom_kill", 0) > 0:
        return {"killed": "memory_limit", "by": "cgroup2", "oom_kills": events["oom_kill"]}
    return None


def _counters(path: Path) -> dict[str, int]:
    try:
        pairs = (line.split() for line in path.read_text().splitlines())
        return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}
    except OSError:
        return {}


def drop_cgroup(path: Path) -> None:
    """Remove a call's cgroup once its processes are gone (logged, not raised, when it cannot be)."""
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
    except OSError as e:
        log.warning("python tool: could not remove the call's cgroup %s: %s", path, e.strerror or e)
