"""The python tool's per-call watcher: what a call's files and processes hold, and the kill past a limit."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lifesearch_local.agent import sandbox_watch
from lifesearch_local.agent.sandbox_watch import (
    INODE_BYTES,
    descendants,
    join_cgroup,
    memory_of,
    tree_bytes,
)

LINUX = sys.platform.startswith("linux")
needs_proc = pytest.mark.skipif(not (LINUX and os.path.isdir("/proc/self")), reason="needs Linux's /proc")


def test_tree_bytes_counts_every_entry_at_least_a_page(tmp_path):
    top = tmp_path / "work"
    (top / "sub").mkdir(parents=True)
    (top / "sub" / "big").write_bytes(os.urandom(1 << 20))
    for i in range(10):
        (top / f"empty{i}").touch()
    total = tree_bytes(str(top), cap=1 << 30)
    assert (1 << 20) + 10 * INODE_BYTES <= total < (1 << 20) + 20 * INODE_BYTES + (1 << 16)


def test_tree_bytes_stops_once_past_the_cap(tmp_path):
    top = tmp_path / "work"
    top.mkdir()
    for i in range(2000):
        (top / f"f{i}").touch()
    total = tree_bytes(str(top), cap=10 * INODE_BYTES)
    assert 10 * INODE_BYTES < total <= 11 * INODE_BYTES


STATUS = b"Name:\tpython\nVmRSS:\t  90000 kB\nRssAnon:\t   70000 kB\nRssFile:\t   19000 kB\nRssShmem:\t    1000 kB\n"


def test_memory_of_counts_resident_anonymous_and_shared_memory(monkeypatch):
    # a fixed status text: how much a process holds on a loaded machine is not the test's to control
    import lifesearch_local.agent.sandbox_watch as watch

    monkeypatch.setattr(watch, "_proc", lambda path: STATUS)
    assert memory_of(1234) == (70000 + 1000) << 10  # file-backed pages (shared libraries) are not the call's


@needs_proc
def test_memory_of_reads_this_process_and_zero_for_a_gone_one():
    assert memory_of(os.getpid()) > 0
    assert memory_of(999_999_999) == 0


@needs_proc
def test_descendants_include_grandchildren():
    code = "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); " \
           "print(p.pid, flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    found = set()
    try:
        grandchild = int(child.stdout.readline())
        found = descendants(os.getpid())
        assert {child.pid, grandchild} <= found and os.getpid() not in found
    finally:
        for pid in found & {grandchild, child.pid} if found else ():
            os.kill(pid, signal.SIGKILL)
        child.kill()
        child.wait()


def test_joining_a_cgroup_that_cannot_be_joined_is_recorded(tmp_path):
    assert join_cgroup({}) == {} and join_cgroup({"cgroup": None}) == {}
    layers = join_cgroup({"cgroup": str(tmp_path / "gone")})
    assert "memory" not in layers and "gone" in layers["cgroup_error"]


WATCHER = """
import json, os, sys
sys.path.insert(0, sys.argv[2])
import sandbox_watch as w  # by path, as the runner loads it
spec, layers, code = json.loads(sys.argv[1])
child = os.fork()
if child == 0:
    os.execv(sys.executable, [sys.executable, "-c", code])
me = os.getpid()
os._exit(w.watch(child, spec, layers, lambda: w.descendants(me), w.kill_descendants))
"""


def _watched(code: str, spec: dict, layers: dict) -> tuple[int, float, list[dict]]:
    """Run `code` in a child of a watcher process, as the runner's init or subreaper would;
    (the watcher's exit status, seconds, the events it sent down the audit pipe)."""
    r, w = os.pipe()
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-I", "-c", WATCHER, json.dumps([{**spec, "audit_fd": w}, layers, code]),
                               str(Path(sandbox_watch.__file__).parent)], pass_fds=(w,), timeout=60)
        os.close(w)
        return proc.returncode, time.monotonic() - t0, [json.loads(line) for line in os.read(r, 65536).splitlines()]
    finally:
        with contextlib.suppress(OSError):
            os.close(w)
        os.close(r)


@needs_proc
def test_the_watch_kills_a_call_past_its_memory():
    code = "import time\nblocks = []\nfor i in range(40):\n    b = bytearray(16 << 20); b[::4096] = b'x' * len(b[::4096])\n" \
           "    blocks.append(b); time.sleep(0.01)\nprint('held 640 MiB')"
    status, seconds, events = _watched(code, {"memory_mb": 128, "scratch_mb": 64, "workdir": "/nonexistent"},
                                       {"memory": "rss-watch", "scratch": "tmpfs"})
    assert status == 137  # killed: left alone, it would print and exit 0 within a second
    assert events and events[0]["killed"] == "memory_limit" and events[0]["limit_mb"] == 128
    assert 128 < events[0]["held_mb"] < 128 + 64  # within a few measurements of the cap


@needs_proc
def test_the_watch_kills_a_call_past_its_scratch(tmp_path):
    code = f"import os, time\nos.chdir({str(tmp_path)!r})\nfor i in range(100):\n" \
           "    open(f'f{i}', 'wb').write(b'x' * (1 << 20)); time.sleep(0.005)\nprint('wrote 100 MiB')"
    status, _, events = _watched(code, {"memory_mb": 4096, "scratch_mb": 8, "workdir": str(tmp_path)},
                                 {"memory": "cgroup2", "scratch": "watch"})
    assert status == 137 and events[0]["killed"] == "scratch_limit"
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) < (8 + 4) << 20


@needs_proc
def test_the_watch_returns_the_snippets_own_status_when_nothing_is_watched():
    status, _, events = _watched("import sys; sys.exit(7)", {"memory_mb": 64, "scratch_mb": 1, "workdir": "/"},
                                 {"memory": "cgroup2", "scratch": "tmpfs"})
    assert status == 7 and events == []
