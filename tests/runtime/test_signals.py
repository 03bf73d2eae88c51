"""SIGTERM over a command: stages share one stop flag, and a signal after the last record finds a
finished command, which exits 0, while one before any work still ends the process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.inputs import ROOT, rubric, task, write_jsonl


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


PRELUDE = "import os, signal\nfrom lifesearch_local.runtime.signals import graceful_stop, command_stop\n"


def test_before_any_work_sigterm_still_ends_the_process():
    done = python(PRELUDE + "with command_stop(program=True):\n    os.kill(os.getpid(), signal.SIGTERM)\n"
                  "    print('survived')\n")
    assert done.returncode == -signal.SIGTERM and "survived" not in done.stdout


def test_once_a_stage_began_sigterm_sets_the_flag_the_stages_share():
    done = python(PRELUDE + "with command_stop(program=True) as cmd:\n"
                  "    with graceful_stop() as stage:\n        same = stage is cmd\n"
                  "    os.kill(os.getpid(), signal.SIGTERM)\n"  # after the stage, before the command returns
                  "    print('finished', same, bool(cmd))\n"
                  "os.kill(os.getpid(), signal.SIGTERM)\n"  # the interpreter's exit: nothing left to save
                  "print('exiting')\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["finished True True", "exiting"]


def test_a_stage_puts_the_handler_back_if_something_replaced_it():
    """Ray's driver installs a SIGTERM handler of its own; inside a stage ours holds again."""
    done = python(PRELUDE + "with command_stop(program=False) as cmd:\n"
                  "    signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
                  "    with graceful_stop():\n        os.kill(os.getpid(), signal.SIGTERM)\n"
                  "    print('stopped', bool(cmd), signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)\n")
    assert done.returncode == 0 and done.stdout.strip() == "stopped True True", done.stderr


def test_a_stage_alone_restores_what_was_there():
    done = python(PRELUDE + "with graceful_stop() as a:\n    pass\n"
                  "print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)\n")
    assert done.stdout.strip() == "True"


def test_sigterm_just_after_the_last_record_exits_0(tmp_path: Path):
    """`judge` receives SIGTERM once its stage is complete (every record written, the manifest says so):
    it used to die of the signal (exit 143, 3 of 3 tries in the issue); it finishes and exits 0."""
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task(f"t{i}", [rubric(f"R{k}", 0.5) for k in range(2)]) for i in range(2)])
    reports = write_jsonl(tmp_path / "reports.jsonl",
                          [{"task_id": f"t{i}", "agent": "a", "run": 0, "text": f"Report {i}."} for i in range(2)])
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "lifesearch_local", "judge", "--tasks", str(tasks), "--reports",
                             str(reports), "--model", "tiny-llama", "--id", "tiny", "--out", str(out), "--quiet"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            stage = json.loads((out / "manifest.json").read_text())["stages"].get("judge/tiny", {})
        except (OSError, ValueError):
            stage = {}
        if stage.get("decisions") == 4:
            break
        time.sleep(0.01)
    finished_first = proc.poll() is not None
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert not finished_first, "the command ended before the signal: nothing was tested"
    assert proc.returncode == 0, stderr
    assert "judge tiny: 4 decisions" in stdout and "rerun the same command to finish" not in stdout
    assert (out / "judgments.jsonl").read_text().count("\n") == 4
