"""The `python` tool: a snippet in a confined subprocess (see sandbox_runner); nothing it starts survives the call."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lifesearch_local.agent.config import PythonToolConfig, ToolsConfig
from lifesearch_local.agent.observation import Observation, clip
from lifesearch_local.agent.sandbox_host import (
    call_cgroup,
    cgroup_killed,
    drop_cgroup,
    read_audit,
    remove_tree,
)
from lifesearch_local.llm.prompts import load_template
from lifesearch_local.records import Task

RUNNER = Path(__file__).with_name("sandbox_runner.py")
TERM_GRACE_S = 1.0  # after SIGTERM, how long the runner may take to kill what the snippet started
log = logging.getLogger(__name__)
_warned: set[str] = set()

# The child's whole environment: no proxies, no tokens, one thread per math library
# (their per-thread arenas would otherwise eat the address-space limit).
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg"}

# Last-line exception names of a failed snippet -> failure kind.
_ERROR_KINDS = {"MemoryError": "memory_limit", "BlockingIOError": "process_limit",
                "PermissionError: network access is disabled": "network_blocked", "PermissionError": "permission_denied",
                "OSError: [Errno 30]": "permission_denied",  # a read-only part of the private root
                "OSError: [Errno 27]": "file_size_limit", "OSError: [Errno 28]": "scratch_limit",
                "OSError: [Errno 101]": "network_blocked",
                "ConnectionRefusedError": "network_blocked"}


@dataclass
class SandboxResult:
    """What one snippet did."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    isolation: dict[str, Any] = field(default_factory=dict)

    def failure(self, cfg: PythonToolConfig) -> tuple[str, str] | None:
        """(kind, explanation) when the snippet did not exit cleanly."""
        if self.isolation.get("refused"):
            return "sandbox_unavailable", (f"{self.isolation['refused']}; the snippet was not run (set "
                                           "tools.python.allow_weak_sandbox: true to run it in the weak mode anyway)")
        killed = self.isolation.get("killed")
        if killed:
            what = (f"its processes together passed {cfg.memory_mb} MiB of memory" if killed["killed"] == "memory_limit"
                    else f"its files together passed {cfg.scratch_mb} MiB")
            held = f", {killed['held_mb']} MiB measured" if "held_mb" in killed else ""
            return killed["killed"], f"the call was killed: {what} ({killed.get('by')}{held})"
        if self.timed_out:
            return "timeout", f"killed after {cfg.wall_s:g} s of wall time"
        if self.returncode == 0:
            return None
        sig = -self.returncode if self.returncode < 0 else self.returncode - 128 if self.returncode > 128 else None
        if sig == signal.SIGXCPU or sig == signal.SIGKILL:
            return "cpu_limit", f"killed by {signal.Signals(sig).name} (CPU limit {cfg.cpu_s} s, or memory)"
        if sig == signal.SIGXFSZ:
            return "file_size_limit", f"killed by SIGXFSZ (file size limit {cfg.file_mb} MiB)"
        last = self.stderr.strip().splitlines()[-1] if self.stderr.strip() else ""
        for name, kind in _ERROR_KINDS.items():
            if last.startswith(name):
                return kind, f"{last} (limits: {cfg.memory_mb} MiB memory, {cfg.max_procs} processes)"
        return "exit_status", f"exit code {self.returncode}"


async def run_snippet(code: str, cfg: PythonToolConfig, *, namespaces: bool = True) -> SandboxResult:
    """Run `code` under the limits of `cfg` in a throwaway directory; nothing survives the call.

    `namespaces=False` skips the namespaces, to exercise the fallback layers.
    """
    loop = asyncio.get_running_loop()
    base = Path(tempfile.mkdtemp(prefix="lifesearch-py-"))
    cgroup, why_not = call_cgroup(cfg.memory_mb, cfg.max_procs)
    if cgroup is None and "cgroup" not in _warned:
        _warned.add("cgroup")
        log.debug("python tool: no cgroup per call (%s); the runner watches the call's memory", why_not)
    audit_r, audit_w = os.pipe()  # the runner's record and events: a channel the snippet never holds
    try:
        spec, env = runner_spec(base, code, cfg, namespaces=namespaces, audit_fd=audit_w, cgroup=cgroup)
        t0 = loop.time()
        with open(base / "out", "w+b") as out, open(base / "err", "w+b") as err:
            try:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-I", str(RUNNER), json.dumps(spec), stdin=asyncio.subprocess.DEVNULL,
                    stdout=out, stderr=err, cwd=spec["workdir"], env=env, start_new_session=True, pass_fds=(audit_w,),
                )
            finally:
                os.close(audit_w)
            timed_out = await _wait(proc, cfg.wall_s)
            seconds = loop.time() - t0
            stdout, stderr = _read(out, cfg), _read(err, cfg)
        isolation = read_audit(audit_r)
        if cgroup is not None and not isolation.get("killed") and (event := cgroup_killed(cgroup)):
            isolation["killed"] = event
    finally:
        os.close(audit_r)
        if cgroup is not None:
            drop_cgroup(cgroup)
        await asyncio.to_thread(_remove, base)  # a deep tree on a slow disk takes seconds: not on the loop
    if isolation.get("mode") in {"weak", "namespaces-weak"} and not isolation.get("refused") and "weak" not in _warned:
        _warned.add("weak")
        log.warning("python tool: %s sandbox (%s); see docs/configuration.md", isolation["mode"],
                    ", ".join(k for k, v in isolation.get("guarantees", {}).items() if not v) or "no seccomp or Landlock")
    return SandboxResult(proc.returncode, stdout, stderr, timed_out, seconds, isolation)


def _remove(base: Path) -> None:
    """The call's directory goes whatever the snippet left in it (any depth, any permissions)."""
    try:
        remove_tree(base)
    except OSError as e:
        log.warning("python tool: could not remove %s: %s", base, e)


def runner_spec(base: Path, code: str, cfg: PythonToolConfig, *, namespaces: bool = True, audit_fd: int | None = None,
                cgroup: Path | None = None) -> tuple[dict, dict]:
    """Prepare `base` (the snippet file, an empty working directory, a mount point for the private
    root) and return the runner's spec and the child's environment. `audit_fd`: the write end of the
    pipe the runner reports on; `cgroup`: the call's cgroup v2 (sandbox_host.call_cgroup)."""
    work, root = base / "work", base / "root"
    work.mkdir()
    root.mkdir()
    (base / "snippet.py").write_text(code, encoding="utf-8")
    if os.geteuid() == 0:  # the runner drops to an unprivileged uid (and hands it work/): let it in
        os.chmod(base, 0o711)
        os.chmod(base / "snippet.py", 0o644)
    spec = {"code": str(base / "snippet.py"), "workdir": str(work), "root": str(root), "cpu_s": cfg.cpu_s,
            "memory_mb": cfg.memory_mb, "file_mb": cfg.file_mb, "scratch_mb": cfg.scratch_mb, "max_files": cfg.max_files,
            "max_procs": cfg.max_procs, "namespaces": namespaces, "allow_weak": cfg.allow_weak_sandbox,
            "audit_fd": audit_fd, "cgroup": str(cgroup) if cgroup else None}
    return spec, {**_ENV, "HOME": str(work), "TMPDIR": str(work)}


async def _wait(proc: asyncio.subprocess.Process, wall_s: float) -> bool:
    """Wait up to wall_s; then (also on cancellation) SIGTERM the runner, which kills everything the
    snippet started, and SIGKILL its process group after a short grace."""
    try:
        await asyncio.wait_for(proc.wait(), wall_s)
        return False
    except asyncio.TimeoutError:
        return True
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), TERM_GRACE_S)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await asyncio.shield(proc.wait())
        await _gone(proc.pid)


async def _gone(pgid: int, limit_s: float = 5.0) -> None:
    """Wait (bounded) until no live process is left in the group. The PID namespace's init is in
    it and exits only after the kernel has killed and reaped everything in its namespace."""
    for _ in range(int(limit_s / 0.01)):
        if not _alive_in_group(pgid):
            return
        await asyncio.sleep(0.01)


def _alive_in_group(pgid: int) -> bool:
    if not os.path.isdir("/proc"):  # not Linux: the group was killed, nothing more to check
        return False
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":  # fields: state, ppid, pgrp, …
            return True
    return False


def _read(f, cfg: PythonToolConfig) -> str:
    f.seek(0)
    return f.read(cfg.file_mb << 20).decode("utf-8", errors="replace")


class PythonTool:
    """Runs Python code in a sandbox: no network, a temporary working directory, hard limits."""

    name = "python"

    def __init__(self, settings: ToolsConfig, web: Any = None):
        self.cfg = settings.python
        # the description is prompt text: a file under prompts/, hashed with the agent's prompts
        self.schema: dict[str, Any] = {
            "type": "function",
            "function": {
                "name": "python",
                "description": load_template("tool_python")[0].strip(),
                "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "Python source"}},
                               "required": ["code"]},
            },
        }

    async def run(self, arguments: dict[str, Any], task: Task) -> Observation:
        res = await run_snippet(str(arguments["code"]), self.cfg)
        failure = res.failure(self.cfg)
        head = f"[python: {failure[0]}: {failure[1]}]" if failure else "[python: exit code 0]"
        body = clip(_streams(res.stdout, res.stderr), self.cfg.max_output_chars)
        data = {"returncode": res.returncode, "seconds": round(res.seconds, 3), "isolation": res.isolation,
                "stdout_chars": len(res.stdout), "stderr_chars": len(res.stderr)}
        summary = f"{failure[0] if failure else 'ok'} in {res.seconds:.2f} s, {len(res.stdout)} chars out"
        return Observation(text=f"{head}\n{body}".rstrip(), ok=failure is None, failure=failure[0] if failure else None,
                           summary=summary, data=data)


def _streams(stdout: str, stderr: str) -> str:
    parts = [f"stdout:\n{stdout.rstrip()}"] if stdout.strip() else []
    parts += [f"stderr:\n{stderr.rstrip()}"] if stderr.strip() else []
    return "\n".join(parts) or "(no output)"
