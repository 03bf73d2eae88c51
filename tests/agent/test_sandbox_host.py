"""The python tool's host side: removing a snippet's tree of any depth, the audit channel, the call's cgroup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from lifesearch_local.agent.sandbox_host import (
    call_cgroup,
    cgroup_killed,
    drop_cgroup,
    read_audit,
    remove_tree,
)

ROOT = sys.platform.startswith("linux") and os.geteuid() == 0
REPO = Path(__file__).resolve().parents[2]


def _nest(top: Path, depth: int, name: str = "d") -> None:
    """`depth` nested directories below `top`, made relative to each other (past PATH_MAX is fine)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("deepest.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            f.write("x" * 5000)
    finally:
        os.close(fd)


def test_1500_nested_directories_are_removed_without_recursion(tmp_path):
    top = tmp_path / "work"
    top.mkdir()
    _nest(top, 1500)
    (top / "a.txt").write_text("a")
    remove_tree(top)
    assert not top.exists() and list(tmp_path.iterdir()) == []


def test_a_tree_deeper_than_path_max_is_removed(tmp_path):
    top = tmp_path / "work"
    top.mkdir()
    _nest(top, 500, name="directory")  # 500 x 10 characters: past PATH_MAX (4096)
    remove_tree(top)
    assert not top.exists()


def test_a_symlink_is_removed_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    top = tmp_path / "work"
    (top / "sub").mkdir(parents=True)
    (top / "sub" / "link").symlink_to(outside)
    (top / "file-link").symlink_to(outside / "keep.txt")
    remove_tree(top)
    assert not top.exists() and (outside / "keep.txt").read_text() == "keep"


LOCK_AND_REMOVE = """
import os, sys
from pathlib import Path
from lifesearch_local.agent.sandbox_host import remove_tree
top = Path(sys.argv[1])
(top / "locked" / "inner").mkdir(parents=True)
(top / "locked" / "inner" / "f.txt").write_text("x")
(top / "readonly").mkdir()
(top / "readonly" / "g.txt").write_text("y")
os.chmod(top / "locked" / "inner", 0)
os.chmod(top / "locked", 0)
os.chmod(top / "readonly", 0o500)
remove_tree(top)
print("gone" if not os.path.lexists(top) else "left")
"""
UNPRIVILEGED = 61_234  # a uid no account uses on a test machine


def _python_for(uid: int) -> str | None:
    """An interpreter `uid` can run that imports this checkout (ours may live under /root)."""
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            ok = subprocess.run([python, "-c", "import lifesearch_local.agent.sandbox_host"], user=uid, group=uid,
                                extra_groups=[], env={"PYTHONPATH": str(REPO)}, capture_output=True, timeout=30)
        except OSError:
            continue
        if ok.returncode == 0:
            return python
    return None


def test_directories_the_snippet_locked_are_opened_up_and_removed(tmp_path):
    # as the tree's owner (root would not need the chmod): the harness's uid owns the snippet's files
    top = tmp_path / "work"
    if not ROOT:
        proc = subprocess.run([sys.executable, "-c", LOCK_AND_REMOVE, str(top)], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    else:
        python = _python_for(UNPRIVILEGED)
        if python is None:
            pytest.skip("no interpreter an unprivileged uid can run with this checkout")
        folder = Path(tempfile.mkdtemp(prefix="lifesearch-user-"))
        os.chown(folder, UNPRIVILEGED, UNPRIVILEGED)
        top = folder / "work"
        try:
            proc = subprocess.run([python, "-c", LOCK_AND_REMOVE, str(top)], user=UNPRIVILEGED, group=UNPRIVILEGED,
                                  extra_groups=[], env={"PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                                  timeout=60)
        finally:
            subprocess.run(["rm", "-rf", str(folder)], check=False)
    assert proc.stdout == "gone\n", proc.stderr


def test_the_audit_channel_gives_the_record_and_a_kill_event():
    r, w = os.pipe()
    record = {"mode": "namespaces", "memory": "rss-watch"}
    event = {"killed": "memory_limit", "by": "watch", "held_mb": 300.0, "limit_mb": 256}
    os.write(w, (json.dumps(record) + "\nnot json\n[1, 2]\n" + json.dumps(event) + "\n").encode())
    os.close(w)
    try:
        assert read_audit(r) == {**record, "killed": event}
    finally:
        os.close(r)


def test_an_empty_audit_channel_is_an_empty_record():
    r, w = os.pipe()
    os.close(w)
    try:
        assert read_audit(r) == {}
    finally:
        os.close(r)


def test_a_cgroup_per_call_where_memory_and_pids_are_delegated(tmp_path):
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory pids\n")
    path, why = call_cgroup(256, 16, base=tmp_path)
    assert why == "" and path is not None and path.parent == tmp_path
    assert (path / "memory.max").read_text() == str(256 << 20) and (path / "pids.max").read_text() == "19"
    assert cgroup_killed(path) is None
    (path / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n")
    assert cgroup_killed(path) == {"killed": "memory_limit", "by": "cgroup2", "oom_kills": 1}


def test_no_cgroup_where_the_controllers_are_not_delegated(tmp_path):
    (tmp_path / "cgroup.subtree_control").write_text("cpu\n")
    path, why = call_cgroup(256, 16, base=tmp_path)
    assert path is None and "not delegated" in why
    assert [p.name for p in tmp_path.iterdir()] == ["cgroup.subtree_control"]  # nothing made, nothing enabled


def test_dropping_a_cgroup_that_cannot_go_logs_instead_of_raising(tmp_path, caplog):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "cgroup.procs").write_text("123\n")  # a plain directory with a file: rmdir fails as on a live cgroup
    drop_cgroup(busy)
    assert busy.exists() and "could not remove" in caplog.text
    drop_cgroup(tmp_path / "gone")  # already gone: nothing to say


@pytest.mark.skipif(not ROOT, reason="as root every directory opens anyway; only the owner's chmod path differs")
def test_root_removes_a_tree_of_another_uid(tmp_path):
    top = tmp_path / "work"
    (top / "x").mkdir(parents=True)
    (top / "x" / "f").write_text("f")
    for p in (top, top / "x", top / "x" / "f"):
        os.chown(p, 61_234, 61_234)
    os.chmod(top / "x", 0)
    remove_tree(top)
    assert not top.exists()
