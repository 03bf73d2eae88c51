"""One writer at a time: a second process is refused naming the holder, a dead holder's lock is taken over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from lifesearch_local.records import Judgment
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.lock import LOCK_FILE, RunDirBusy
from tests.helpers.cli import cli_process, judge_sample_args, run_cli
from tests.helpers.inputs import ROOT, judge_inputs

# -- a symlinked lock file is not followed --------------------------------------------------------------------

def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "run"
    out.mkdir()
    os.symlink(victim, out / LOCK_FILE)
    tasks, reports = judge_inputs(tmp_path)
    code, _, err = run_cli(["judge", "--tasks", str(tasks), "--reports", str(reports), "--model", "tiny-llama",
                            "--out", str(out), "--quiet"], capsys)
    assert victim.read_text() == "precious\n"
    assert code == 2 and "symbolic link" in err and "Traceback" not in err, err


HOLD = ("import sys, time\nfrom lifesearch_local.rundir.directory import RunDir\n"
        "with RunDir(sys.argv[1]).locked('judge'):\n    print('held', flush=True)\n    time.sleep(120)\n")


@pytest.fixture
def holder(tmp_path):
    """A second process holding the lock of tmp_path/run."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "run")], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_a_second_process_is_refused_naming_the_holder(tmp_path, holder):
    rd = RunDir(tmp_path / "run")
    with pytest.raises(RunDirBusy, match=rf"in use by another lifesearch process \(pid {holder.pid}, "
                       r"`lifesearch judge` since "), rd.locked():
        pass
    with pytest.raises(RunDirBusy):  # every write needs the lock
        rd.append("judgments.jsonl", [Judgment(task_id="t", agent="a", rubric_id="R", judge="j", satisfied=True)])
    assert not rd.file("judgments.jsonl").exists()


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path, holder):
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    rd = RunDir(tmp_path / "run")
    with rd.locked("judge"):
        assert json.loads(rd.file(LOCK_FILE).read_text())["pid"] == os.getpid()
        with rd.locked():  # reentrant within the process
            rd.update_manifest(hashes={"x": "1"})
    assert not rd.holds_lock()


def test_judge_cli_refuses_a_run_dir_in_use(tmp_path, holder):
    res = cli_process(judge_sample_args(tmp_path / "run", "--model", "tiny-llama"))
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and f"pid {holder.pid}" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "run" / "judgments.jsonl").exists()


@pytest.mark.slow
def test_two_concurrent_judge_runs_one_refused(tmp_path):
    out = tmp_path / "run"
    args = [sys.executable, "-m", "lifesearch_local", *judge_sample_args(out, "--model", "tiny-llama")]
    procs = [subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], results
    loser = results[[p.returncode for p in procs].index(2)][1]
    assert "in use by another lifesearch process (pid" in loser
    rows = RunDir(out).load("judgments.jsonl", Judgment)
    assert len(rows) == len({r.key for r in rows}) > 0


def test_a_holder_record_nested_deep_is_named_pid_unknown(tmp_path):
    # whoever holds the lock writes the record the refusal reads: 2,000 levels deep it must not recurse
    (tmp_path / "run").mkdir()
    script = ("import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
              "fcntl.flock(fd, fcntl.LOCK_EX)\nos.write(fd, b'[' * 2000 + b'\\n')\nprint('held', flush=True)\n"
              "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "run" / LOCK_FILE)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(RunDirBusy, match=r"in use by another lifesearch process \(pid unknown\)"), \
                RunDir(tmp_path / "run").locked():
            pass
    finally:
        proc.kill()
        proc.wait()
