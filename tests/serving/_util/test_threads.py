"""Threads fitted to the usable CPUs, and a passive OpenMP wait on a busy machine (fake affinity/cgroup/env)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from serving._util import threads
from serving._util.threads import (
    Contention,
    CpuLimits,
    actor_env,
    is_busy,
    others_busy,
    slowdown,
    usable_cpus,
    wait_policy,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("limits", "expected"), [
    (CpuLimits(affinity=8, cpu_max="max 100000", slurm_cpus=None), 8),
    (CpuLimits(affinity=8, cpu_max="200000 100000", slurm_cpus=None), 2),
    (CpuLimits(affinity=8, cpu_max="150000 100000", slurm_cpus=None), 1),  # 1.5 CPUs: a second thread is throttled
    (CpuLimits(affinity=8, cpu_max="50000 100000", slurm_cpus=None), 1),  # never below one
    (CpuLimits(affinity=8, cpu_max="400000", slurm_cpus=None), 4),  # the period's default
    (CpuLimits(affinity=8, cpu_max=None, slurm_cpus="3"), 3),
    (CpuLimits(affinity=2, cpu_max=None, slurm_cpus="16"), 2),  # Slurm's figure never raises the affinity
    (CpuLimits(affinity=16, cpu_max="800000 100000", slurm_cpus="6", reserved=4.0), 4),
    (CpuLimits(affinity=16, cpu_max=None, slurm_cpus=None, reserved=2.5), 2),
    (CpuLimits(affinity=4, cpu_max="garbage", slurm_cpus="many"), 4),  # unparsable: no bound
    (CpuLimits(affinity=4, cpu_max="100000 0", slurm_cpus=None), 4),
])
def test_usable_cpus_is_the_smallest_bound(limits: CpuLimits, expected: int) -> None:
    assert usable_cpus(limits) == expected


def test_usable_cpus_without_any_bound_is_the_cpu_count() -> None:
    assert usable_cpus(CpuLimits(affinity=None, cpu_max=None, slurm_cpus=None)) == max(1, os.cpu_count() or 1)


def test_others_busy_is_the_median_of_the_processes_running_now_less_this_one() -> None:
    assert others_busy(["0.10 0.05 0.01 1/200 999"] * 5) == 0.0  # only this process runs
    assert others_busy(["0.15 0.05 0.01 2/200 999"] * 5) == 1.0  # a hog started seconds ago: the average lags
    assert others_busy(["3.50 2.00 1.00 1/200 999"] * 5) == 0.0  # a command that just ended: the average lags too
    burst = ["0.5 0.5 0.5 1/200 9"] * 3 + ["0.5 0.5 0.5 6/200 9"] * 2
    assert others_busy(burst) == 0.0  # a burst in two samples of five is not a busy machine
    assert others_busy(["nonsense"]) == 0.0 and others_busy([]) == 0.0


def test_sample_loadavg_reads_the_file_a_few_times(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = iter(f"0.1 0.1 0.1 {k}/100 9" for k in range(1, 10))
    monkeypatch.setattr(threads, "_loadavg", lambda: next(reads))
    assert [t.split()[3] for t in threads.sample_loadavg(3, 0.0)] == ["1/100", "2/100", "3/100"]


def test_busy_and_slowdown_on_two_cores() -> None:
    assert not is_busy(0.2, usable=2, threads=2)
    assert is_busy(1.0, usable=2, threads=2)  # one hog beside two threads
    assert not is_busy(1.0, usable=2, threads=1)
    assert slowdown(0.2, 2, 2) == 1.0
    assert slowdown(1.0, 2, 2) == 2.0  # the thread sharing the hog's core runs at half speed
    assert slowdown(5.0, 2, 2) == 4.0  # ceil(5 / 2) others on the slowest thread's core
    assert slowdown(1.0, 16, 8) == 1.0


def test_wait_policy_passive_only_on_a_busy_machine_and_before_torch_starts() -> None:
    assert wait_policy({}, others=1.0, usable=2, torch_loaded=False) == "PASSIVE"
    assert wait_policy({}, others=0.1, usable=2, torch_loaded=False) is None  # idle: spinning is fastest
    assert wait_policy({}, others=1.0, usable=2, torch_loaded=True) is None  # libgomp has read it already
    assert wait_policy({"OMP_WAIT_POLICY": "ACTIVE"}, others=5.0, usable=2, torch_loaded=False) is None
    assert wait_policy({"GOMP_SPINCOUNT": "1000"}, others=5.0, usable=2, torch_loaded=False) is None


def test_plan_process_threads_sets_the_policy_on_a_busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.delenv(threads.DECIDED, raising=False)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(threads, "read_limits", lambda env=None, reserved=None: CpuLimits(2, None, None))
    monkeypatch.setattr(threads, "_loadavg", lambda: "3.30 0.20 0.10 1/100 5")  # only this process runs now
    assert threads.plan_process_threads() is None
    assert "OMP_WAIT_POLICY" not in os.environ
    monkeypatch.setattr(threads, "_loadavg", lambda: "0.20 0.20 0.10 2/100 5")
    assert threads.plan_process_threads() == "PASSIVE"
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert actor_env(remote=False) == {"OMP_WAIT_POLICY": "PASSIVE"}  # the actors follow the driver's decision


def test_actor_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv(threads.DECIDED, raising=False)
    assert actor_env(remote=False) == {}
    assert actor_env(remote=True) == {"OMP_WAIT_POLICY": "PASSIVE"}  # a remote node's load is not visible here
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert actor_env(remote=True) == {"OMP_WAIT_POLICY": "ACTIVE"}  # the user's own choice travels


def test_contention_line_names_the_load_the_cpus_and_the_slowdown() -> None:
    idle = Contention(usable=2, threads=2, others=0.1, load_average=(0.1, 0.1, 0.1))
    assert idle.line() is None
    busy = Contention(usable=2, threads=2, others=1.0, load_average=(1.0, 0.5, 0.2))
    line = busy.line()
    assert line is not None and line.startswith("machine busy: load average 1, 1 other busy process(es) on ")
    assert "2 usable CPU(s)" in line and "up to 2×" in line and "\n" not in line


def test_fit_torch_threads_respects_omp_num_threads_and_a_ray_reservation(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "read_limits", lambda env=None, reserved=None: CpuLimits(8, None, None, reserved))
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        torch.set_num_threads(1)
        assert threads.fit_torch_threads() == 1  # the user's (or the test runner's) choice stands
        assert threads.fit_torch_threads(reserved=1.0) == 1
        monkeypatch.delenv("OMP_NUM_THREADS")
        monkeypatch.setattr(threads, "read_limits", lambda env=None, reserved=None: CpuLimits(1, None, None, reserved))
        assert threads.fit_torch_threads() == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_the_command_line_decides_before_torch_is_imported() -> None:
    code = ("import sys, lifesearch_local.cli\nfrom serving import plan_process_threads\n"
            "assert 'torch' not in sys.modules, 'torch imported before the wait policy is set'\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
