"""Runs one python-tool snippet after confining this process; executed as `python -I sandbox_runner.py SPEC`.

Every limit is applied here, in a fresh single-threaded interpreter, before the snippet's
first line runs (the harness is multi-threaded, where `preexec_fn` is unsafe). In order:

1. namespaces: a new network namespace (no interface but a down loopback: nothing is
   reachable) and a new PID namespace whose init dies with the snippet or with this
   runner, after which the kernel kills every process left in it — directly as root, else
   inside a new user namespace; skipped where the kernel refuses;
2. rlimits: CPU seconds, address space (RLIMIT_AS), file size (caps stdout/stderr and
   any file written), open files, no core dumps, and RLIMIT_NPROC;
3. as root, a switch to an unprivileged uid of the sandbox's own (100000 + pid mod 100000,
   else 65534), because root ignores RLIMIT_NPROC and concurrent sandboxes must not share
   one process count; only CAP_DAC_READ_SEARCH is kept (ambient, so child processes keep
   it) so that an interpreter installed under a private home stays readable — reads are
   not confined;
4. Landlock: writes only beneath the working directory (and /dev/null); when there is no
   network namespace, TCP connect/bind denied (ABI 4+); signals and abstract UNIX sockets
   scoped to the sandbox (ABI 6+), so the snippet cannot signal the harness;
5. without a network namespace, a socket() that refuses AF_INET/AF_INET6 in Python.

The first stderr line is `#sandbox {json}` naming the layers that took effect.
Only the standard library is imported here.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import runpy
import select
import signal
import sys

CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
PR_SET_PDEATHSIG, PR_SET_KEEPCAPS, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 8, 24, 38, 47
CAP_DAC_READ_SEARCH, NOBODY = 2, 65534
UID_BASE, UID_SPAN = 100_000, 100_000
# Landlock syscalls have the same numbers on every architecture (generic table).
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
FS_WRITE_FILE, FS_TRUNCATE = 1 << 1, 1 << 14
FS_WRITE_ALL_V1 = (1 << 1) | sum(1 << b for b in range(4, 13))  # write, remove, make_*
FS_REFER = 1 << 13

_libc = ctypes.CDLL(None, use_errno=True)
LINUX = sys.platform.startswith("linux")  # elsewhere only rlimits and the Python socket block apply


def _call(name: str, *args: int) -> bool:
    return getattr(_libc, name)(*args) == 0


def isolate_namespaces() -> dict:
    """Network + PID namespaces; as root directly, else through a user namespace."""
    for flags, how in ((CLONE_NEWNET | CLONE_NEWPID, "root"), (CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID, "userns")):
        if LINUX and _call("unshare", flags):
            return {"net": "netns", "pid": "pidns", "ns_via": how}
    return {"net": None, "pid": None}


def _relay(pid: int) -> None:
    """Wait for `pid` and exit with its status (128 + signal when killed)."""
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def enter_pid_namespace() -> None:
    """Fork an init for the new PID namespace, which forks the snippet's process and waits for it.

    The init dies with this runner (parent-death signal) and the snippet's exit ends the init;
    either way the kernel then kills every process left in the namespace. The snippet is
    not PID 1 itself, so the usual signal semantics (SIGXCPU, SIGXFSZ) still apply to it.
    """
    alive_r, alive_w = os.pipe()  # EOF on it means the runner is gone (getppid() is 0 across namespaces)
    init = os.fork()
    if init:
        os.close(alive_r)
        _relay(init)
    os.close(alive_w)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if select.select([alive_r], [], [], 0)[0]:  # the runner died before the signal was armed
        os._exit(137)
    child = os.fork()
    if child:
        _relay(child)


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


def sandbox_uid() -> int:
    """As root: a uid of this sandbox's own (from the runner's pid), so that RLIMIT_NPROC counts
    only its processes, not those of other sandboxes running at the same time."""
    return UID_BASE + os.getpid() % UID_SPAN


def set_limits(spec: dict, in_use: int) -> dict:
    """Every rlimit, never above a hard limit already in place (which an unprivileged process cannot raise)."""
    mb = 1 << 20
    limits = {
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_CPU: (spec["cpu_s"], spec["cpu_s"] + 1),
        resource.RLIMIT_AS: spec["memory_mb"] * mb,
        resource.RLIMIT_FSIZE: spec["file_mb"] * mb,
        resource.RLIMIT_NOFILE: spec["max_files"],
        resource.RLIMIT_NPROC: in_use + spec["max_procs"],
    }
    failed = []
    for what, value in limits.items():
        soft, hard = value if isinstance(value, tuple) else (value, value)
        cap = resource.getrlimit(what)[1]
        if cap != resource.RLIM_INFINITY:
            soft, hard = min(soft, cap), min(hard, cap)
        try:
            resource.setrlimit(what, (soft, hard))
        except (ValueError, OSError):
            failed.append(what)
    return {"rlimits_failed": failed} if failed else {}


def drop_root(uid: int, workdir: str) -> dict:
    """Become `uid` (else 65534, where the uid map allows no other), owner of `workdir`, keeping
    only CAP_DAC_READ_SEARCH (effective, permitted, inheritable, ambient)."""
    for cap in range(64):
        if cap != CAP_DAC_READ_SEARCH:
            _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails past the last cap: harmless
    _libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0)
    for candidate in (uid, NOBODY):
        try:
            os.chown(workdir, candidate, candidate)
            os.setgroups([])
            os.setresgid(candidate, candidate, candidate)
            os.setresuid(candidate, candidate, candidate)
            uid = candidate
            break
        except OSError:
            continue

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    bit = 1 << CAP_DAC_READ_SEARCH
    data = (Data * 2)(Data(bit, bit, bit), Data(0, 0, 0))
    kept = _libc.capset(ctypes.byref(Header(0x20080522, 0)), data) == 0
    kept = kept and _libc.prctl(PR_CAP_AMBIENT, 2, CAP_DAC_READ_SEARCH, 0, 0) == 0
    return {"uid": os.getuid(), "read_all": kept}


def landlock(workdir: str, deny_tcp: bool) -> dict:
    """Writes only beneath `workdir` (+ /dev/null); optionally no TCP; scoped signals."""
    abi = _libc.syscall(SYS_CREATE_RULESET, None, 0, 1) if LINUX else -1
    if abi < 1:
        return {"fs": None}
    fs = FS_WRITE_ALL_V1 | (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0)
    net = 0b11 if (deny_tcp and abi >= 4) else 0
    scoped = 0b11 if abi >= 6 else 0
    attr = (ctypes.c_uint64 * 3)(fs, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = _libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        return {"fs": None}

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    for path, access in ((workdir, fs), ("/dev/null", FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0))):
        fd = os.open(path, os.O_PATH)
        _libc.syscall(SYS_ADD_RULE, ruleset, 1, ctypes.byref(PathBeneath(access, fd)), 0)
        os.close(fd)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    ok = _libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) == 0
    os.close(ruleset)
    return {"fs": "landlock" if ok else None, "tcp": "landlock" if ok and net else None,
            "signals": "scoped" if ok and scoped else None, "landlock_abi": abi}


def block_sockets() -> None:
    """Last resort when the kernel offers no network isolation: refuse IP sockets in Python."""
    import _socket
    import socket

    base = socket.socket

    class NoNetSocket(base):  # type: ignore[misc,valid-type]
        def __init__(self, family=-1, *args, **kwargs):
            if family in (-1, socket.AF_INET, socket.AF_INET6):
                raise PermissionError("network access is disabled in the python tool")
            super().__init__(family, *args, **kwargs)

    socket.socket = NoNetSocket  # type: ignore[misc]
    _socket.socket = NoNetSocket  # type: ignore[misc]


def main() -> None:
    spec = json.loads(sys.argv[1])
    root = os.geteuid() == 0 and LINUX
    uid = sandbox_uid() if root else os.getuid()
    in_use = tasks_of_uid(uid)  # counted before a user namespace would hide who owns what
    layers = isolate_namespaces() if spec.get("namespaces", True) else {"net": None, "pid": None}
    if layers["pid"]:
        enter_pid_namespace()
    layers.update(set_limits(spec, in_use))
    if root and layers.get("ns_via") != "userns":
        layers.update(drop_root(uid, spec["workdir"]))
    else:
        layers["uid"] = os.getuid()
    layers.update(landlock(spec["workdir"], deny_tcp=not layers["net"]))
    if not layers["net"] and not layers.get("tcp"):
        block_sockets()
        layers["net"] = "python-socket-blocked"
    os.chdir(spec["workdir"])
    print("#sandbox " + json.dumps(layers), file=sys.stderr, flush=True)
    sys.argv = ["<python>"]
    sys.path[0] = spec["workdir"]
    runpy.run_path(spec["code"], run_name="__main__")


if __name__ == "__main__":
    main()
