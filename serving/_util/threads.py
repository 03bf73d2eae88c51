"""Compute threads that fit the CPUs a process may use, and an OpenMP wait that yields them on a busy machine.

Two OpenMP threads spin-waiting on two cores beside one other busy process made the packed judge
kernel 16× slower (each parallel region waits for the thread whose core the other process holds,
while its sibling spins on the core it needs). Here: as many threads as the CPUs this process may
use (affinity, cgroup v2 quota, Slurm's CPUs per task, a Ray reservation), and, where the machine
is already busier than those threads allow, OpenMP threads that sleep when they wait
(OMP_WAIT_POLICY=PASSIVE). That variable is read once, when libgomp starts (with torch's import),
so the command line sets it first thing; on an idle machine the default spinning wait stays
(passive waiting costs about a fifth of the speed of a small model's many short parallel regions).
"""

from __future__ import annotations

import logging
import math
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
WAIT = "OMP_WAIT_POLICY"
SAMPLES = 5
# Set by `plan_process_threads` so that later decisions in the process (and Ray actors it starts) know it decided.
DECIDED = "LIFESEARCH_OMP_WAIT"


@dataclass(frozen=True)
class CpuLimits:
    """What bounds the CPUs a process may use, as read from the system (None: no such bound)."""

    affinity: int | None
    """CPUs in the process's affinity mask (os.sched_getaffinity)."""
    cpu_max: str | None
    """The cgroup v2 `cpu.max` line ("max 100000" or "QUOTA PERIOD")."""
    slurm_cpus: str | None
    """SLURM_CPUS_PER_TASK."""
    reserved: float | None = None
    """CPUs a Ray actor reserved (num_cpus)."""


def usable_cpus(limits: CpuLimits) -> int:
    """The CPUs a process may keep busy: the smallest of its bounds, at least 1. A cgroup quota of
    150000/100000 gives 1 (a second thread would be throttled half the time); unparsable values are no bound."""
    bounds = [limits.affinity, _quota(limits.cpu_max), _int(limits.slurm_cpus),
              math.floor(limits.reserved) if limits.reserved else None]
    known = [b for b in bounds if b]
    return max(1, min(known)) if known else max(1, os.cpu_count() or 1)


def _quota(cpu_max: str | None) -> int | None:
    """CPUs a cgroup v2 `cpu.max` line allows ("max PERIOD": no limit); its period defaults to 100000."""
    parts = (cpu_max or "max").split()
    if parts[0] == "max":
        return None
    quota, period = _int(parts[0]), _int(parts[1]) if len(parts) > 1 else 100000
    return max(1, quota // period) if quota and period else None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def others_busy(samples: Sequence[str]) -> float:
    """Processes other than this one keeping CPUs busy: the median, over a few samples of /proc/loadavg's text, of
    the processes runnable at that moment less this one. Not the 1-minute average: it lags a new busy process by
    a minute, and it still counts a command that ended seconds ago (the one before this, run back to back)."""
    running = []
    for text in samples:
        try:
            running.append(int(text.split()[3].split("/")[0]) - 1)
        except (IndexError, ValueError):
            continue
    return float(max(0, statistics.median_low(running))) if running else 0.0


def sample_loadavg(n: int = SAMPLES, gap_s: float = 0.02) -> list[str]:
    """`n` readings of /proc/loadavg, `gap_s` apart (about 0.1 s in all: a short burst is not a busy machine)."""
    out = []
    for i in range(n):
        if i:
            time.sleep(gap_s)
        out.append(_loadavg())
    return out


def is_busy(others: float, usable: int, threads: int) -> bool:
    """Whether `threads` of ours beside `others` busy processes want more than the `usable` CPUs (half a CPU of slack)."""
    return others + threads > usable + 0.5


def slowdown(others: float, usable: int, threads: int) -> float:
    """How much slower than idle a parallel region can run: each waits for its slowest thread, and the slowest
    shares its core with ceil(excess / usable) other processes (1.0 when nothing has to share)."""
    excess = others + threads - usable
    return 1.0 if excess <= 0.5 else 1.0 + math.ceil(excess / usable)


def read_limits(env: Mapping[str, str] | None = None, reserved: float | None = None) -> CpuLimits:
    """This process's bounds: its affinity, its cgroup v2 quota, Slurm's CPUs per task, a Ray reservation."""
    env = os.environ if env is None else env
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return CpuLimits(affinity=affinity, cpu_max=_cgroup_cpu_max(), slurm_cpus=env.get("SLURM_CPUS_PER_TASK"),
                     reserved=reserved)


def _cgroup_cpu_max() -> str | None:
    """The `cpu.max` of this process's cgroup v2 (the unified line `0::/path` of /proc/self/cgroup)."""
    try:
        line = next(x for x in Path("/proc/self/cgroup").read_text().splitlines() if x.startswith("0::"))
        path = Path("/sys/fs/cgroup") / line[3:].lstrip("/") / "cpu.max"
        return path.read_text().strip() if path.is_file() else None
    except (OSError, StopIteration):
        return None


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text()
    except OSError:
        return " ".join(f"{x:.2f}" for x in os.getloadavg()) + " 1/1 0"


@dataclass(frozen=True)
class Contention:
    """The machine as a command found it: usable CPUs, our threads, how busy the rest is."""

    usable: int
    threads: int
    others: float
    """Other busy processes (see `others_busy`)."""
    load_average: tuple[float, float, float]

    @property
    def busy(self) -> bool:
        return is_busy(self.others, self.usable, self.threads)

    @property
    def factor(self) -> float:
        return slowdown(self.others, self.usable, self.threads)

    def line(self) -> str | None:
        """One line saying the machine is busier than our threads allow (None when it is not)."""
        if not self.busy:
            return None
        wait = os.environ.get(WAIT, "spinning (default)")
        return (f"machine busy: load average {self.load_average[0]:g}, {self.others:g} other busy process(es) on "
                f"{self.usable} usable CPU(s) for {self.threads} thread(s); timings may be up to {self.factor:g}× "
                f"an idle machine's (OpenMP wait: {wait})")


def contention(threads: int | None = None, reserved: float | None = None) -> Contention:
    """The machine now, for `threads` of ours (default: the usable CPUs)."""
    usable = usable_cpus(read_limits(reserved=reserved))
    texts = sample_loadavg()
    one, five, fifteen = (float(x) for x in texts[-1].split()[:3])
    return Contention(usable=usable, threads=threads or usable, others=others_busy(texts),
                      load_average=(one, five, fifteen))


def wait_policy(env: Mapping[str, str], others: float, usable: int, torch_loaded: bool) -> str | None:
    """The OMP_WAIT_POLICY to set, or None: keep the user's (OMP_WAIT_POLICY or GOMP_SPINCOUNT set), too late
    (torch already imported: libgomp read it), or an idle machine (spinning is fastest there)."""
    if WAIT in env or "GOMP_SPINCOUNT" in env or torch_loaded:
        return None
    return "PASSIVE" if is_busy(others, usable, usable) else None


def plan_process_threads() -> str | None:
    """Called first by a command, before torch is imported: set OMP_WAIT_POLICY=PASSIVE where the machine is
    busier than this process's threads allow; returns the policy set (None: left as it was)."""
    usable = usable_cpus(read_limits())
    policy = wait_policy(os.environ, others_busy(sample_loadavg()), usable, "torch" in sys.modules)
    if policy:
        os.environ[WAIT] = policy
        os.environ[DECIDED] = policy
    return policy


def fit_torch_threads(reserved: float | None = None) -> int:
    """torch's intra-op threads set to the usable CPUs (a Ray reservation bounding them), unless the user chose
    with OMP_NUM_THREADS (respected, as Ray's own setting for its workers is replaced by `reserved`); returns it."""
    import torch

    if os.environ.get("OMP_NUM_THREADS") and reserved is None:
        return torch.get_num_threads()
    n = usable_cpus(read_limits(reserved=reserved))
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
        log.debug("torch threads: %d (the CPUs this process may use)", n)
    return n


def actor_env(remote: bool) -> dict[str, str]:
    """Environment for CPU engine actors: a passive OpenMP wait when this process chose one, or on a remote
    cluster (whose nodes' load this process cannot see and whose actors share nodes by design)."""
    if WAIT in os.environ and DECIDED not in os.environ:
        return {WAIT: os.environ[WAIT]}  # the user's own choice travels as given
    if remote or os.environ.get(DECIDED):
        return {WAIT: "PASSIVE"}
    return {}
