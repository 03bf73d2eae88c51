"""Runs one python-tool snippet after confining this process; executed as `python -I sandbox_runner.py SPEC`.

Every layer is applied here, in a fresh single-threaded interpreter, before the snippet's
first line runs (the harness is multi-threaded, where `preexec_fn` is unsafe):

0. the call's cgroup v2 (memory.max, pids.max), joined first, where the harness could make one;
1. namespaces (as root directly, else inside a new user namespace; skipped where the kernel
   refuses): network (no interface but a down loopback), PID (its init dies with this runner,
   then the kernel kills everything left), IPC, UTS and mount. In the mount namespace the
   snippet gets a private root: a read-only tmpfs holding only the Python installation, the
   system's /usr and /lib*, two /etc files, a few /dev nodes and a fresh /proc of its own PID
   namespace; its working directory and /dev/shm are one tmpfs of `scratch_mb` (the call's
   writes capped together, gone with the namespace: nothing of them reaches the host's disk).
   Home, run directories, /etc/passwd and every host socket are simply not there;
   without namespaces this process stays outside as a child subreaper: everything the snippet
   starts (double-forked, setsid) is reparented to it and killed when the snippet ends or
   when the harness sends SIGTERM;
2. rlimits: CPU seconds, address space, file size, open files, no core dumps, RLIMIT_NPROC;
3. as root, a uid of the sandbox's own (100000 + pid mod 100000, else 65534) with every
   capability dropped, the bounding set included. The one exception: without a private root,
   an interpreter that uid cannot reach (e.g. under /root) keeps CAP_DAC_READ_SEARCH, which
   Landlock then confines to the paths below;
4. Landlock (where the kernel has it): reads and execution only beneath the Python
   installation, the system directories above and the snippet file; reads, writes and
   execution beneath the working directory (and /dev/null) — a binary the snippet writes there
   runs, confined by every layer here; no TCP (ABI 4+); signals and abstract UNIX sockets
   scoped to the sandbox (ABI 6+);
5. seccomp: socket() refused for every family (socketpair only for AF_UNIX), io_uring,
   namespaces, mounts, ptrace, keyrings, bpf and file handles refused;
6. a Python-level socket() refusal, only for a clearer message.

The process that waits for the snippet (the init, or the subreaper) measures what no kernel caps
for the call (sandbox_watch: its processes' memory without a cgroup, its scratch directory without
the tmpfs) and ends the call past a limit. The layers that took effect, the resulting mode
(namespaces, landlock; namespaces-weak or weak only when the spec allows them) and such a kill
go to the harness as JSON lines on the audit descriptor (`audit_fd`), a pipe the snippet never
holds: nothing it prints can forge them. Only the standard library is imported here.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import resource
import runpy
import select
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sandbox_kernel as kernel  # noqa: E402  (a sibling file: -I leaves the script's folder off sys.path)
import sandbox_watch as watch  # noqa: E402

del sys.path[0]

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MNT_DETACH = 1024, 2048, 1 << 21, 2
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
NOBODY, UID_BASE, UID_SPAN, REFUSED = 65534, 100_000, 100_000, 3
SYSTEM = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache", "/etc/localtime"]
DEVICES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"]

_libc = ctypes.CDLL(None, use_errno=True)
LINUX = kernel.LINUX


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def python_paths() -> list[str]:
    """The interpreter's installation (venv and base), as given and resolved."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    return sorted(prefixes | {os.path.realpath(p) for p in prefixes})


def read_paths(spec: dict) -> list[str]:
    """Everything the snippet may read: the interpreter, the system's libraries, its own file."""
    return python_paths() + SYSTEM + [spec["code"]]


# --- 1. namespaces ---------------------------------------------------------------------------
def unshare_all(root: bool) -> dict:
    """Network, PID, IPC, UTS and mount namespaces; as root directly, else through a user namespace
    mapping only our own uid and gid."""
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    uid, gid = os.getuid(), os.getgid()
    if root:  # never through a user namespace: its mapped root would still own the host's root files
        return {"ns_via": "root"} if _libc.unshare(flags) == 0 else {}
    if _libc.unshare(flags | CLONE_NEWUSER) == 0:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        return {"ns_via": "userns"}
    return {}


def _relay(pid: int) -> None:
    """Wait for `pid` and exit with its status (128 + signal when killed)."""
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def enter_pid_namespace(spec: dict, layers: dict) -> None:
    """Fork the PID namespace's init, which builds the private root and forks the snippet's process.

    The init dies with this runner (parent-death signal) and the snippet's exit ends the init;
    either way the kernel then kills every process left in the namespace. The snippet is not
    PID 1 itself, so the usual signal semantics (SIGXCPU, SIGXFSZ) still apply to it.
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
    layers.update(net="netns", pid="pidns")
    try:
        private_root(spec)
        layers.update(mnt="private-root", scratch="tmpfs")
    except OSError as e:
        layers.update(mnt_error=str(e), scratch="watch")
    layers["memory"] = layers["memory"] or "rss-watch"
    child = os.fork()
    if child:  # kill(-1) from a PID namespace's init reaches every other process in it
        me = watch.this_pid()
        os._exit(watch.watch(child, spec, layers, lambda: watch.descendants(me), lambda: os.kill(-1, signal.SIGKILL)))


def private_root(spec: dict) -> None:
    """Replace this mount namespace's root by a read-only tmpfs holding only what the snippet needs."""
    new = spec["root"]
    os.umask(0o022)
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    _check(_libc.mount(b"tmpfs", new.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755,size=1m"), "tmpfs root")
    _bind_all(new, read_paths(spec), read_only=True)
    _bind_all(new, DEVICES, read_only=False, devices=True)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{new}/dev/{name}")
    scratch(new, spec)
    os.makedirs(f"{new}/proc")  # mounted while the host's /proc is still visible (a user namespace requires it)
    _check(_libc.mount(b"proc", f"{new}/proc".encode(), b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "proc")
    os.chdir(new)
    _check(_libc.syscall(SYS_PIVOT_ROOT[platform.machine()], b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")
    _check(_libc.mount(None, b"/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None), "/ read-only")


def scratch(new: str, spec: dict) -> None:
    """One tmpfs of `scratch_mb` (and 256 inodes per MiB) behind both the working directory and
    /dev/shm, mounted at a staging point that is then detached: every write of the call counts
    against one cap, and all of it vanishes with the mount namespace."""
    stage, size = f"{new}/.scratch", spec["scratch_mb"]
    os.makedirs(stage)
    opts = f"mode=0755,size={size}m,nr_inodes={size * 256}".encode()
    _check(_libc.mount(b"tmpfs", stage.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts), "tmpfs scratch")
    os.mkdir(f"{stage}/work", 0o700)
    os.mkdir(f"{stage}/shm")
    os.chmod(f"{stage}/shm", 0o1777)
    for src, dst in ((f"{stage}/work", new + spec["workdir"]), (f"{stage}/shm", f"{new}/dev/shm")):
        os.makedirs(dst)
        _check(_libc.mount(src.encode(), dst.encode(), None, MS_BIND, None), f"bind {dst}")
    _check(_libc.umount2(stage.encode(), MNT_DETACH), "detach the scratch staging point")
    os.rmdir(stage)


def _bind_all(new: str, paths: list[str], read_only: bool, devices: bool = False) -> None:
    """Bind each existing path at the same place under `new` (top-level symlinks recreated as symlinks)."""
    for path in sorted(set(paths), key=lambda p: p.count("/")):
        dst = new + path
        if os.path.islink(path) and os.path.dirname(path) == "/":  # /lib -> usr/lib on merged-/usr systems
            os.symlink(os.readlink(path), dst)
            continue
        if not os.path.exists(path) or _beneath_bound(new, path):
            continue
        if os.path.isdir(path):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            open(dst, "a").close()
        _check(_libc.mount(path.encode(), dst.encode(), None, MS_BIND | MS_REC, None), f"bind {path}")
        flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (0 if devices else MS_NODEV) | (MS_RDONLY if read_only else 0)
        _check(_libc.mount(None, dst.encode(), None, flags | _locked_flags(path), None), f"remount {path}")


def _beneath_bound(new: str, path: str) -> bool:
    """Whether `path` already lies in a bound tree (binding it again would be redundant)."""
    parent = os.path.dirname(path)
    while parent != "/":
        if os.path.ismount(new + parent) or os.path.islink(new + parent):
            return True
        parent = os.path.dirname(parent)
    return False


def _locked_flags(path: str) -> int:
    """Flags of the source mount a bind remount must keep (a user namespace refuses to clear them)."""
    f = os.statvfs(path).f_flag
    pairs = ((os.ST_RDONLY, MS_RDONLY), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
             (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))
    return sum(ms for st, ms in pairs if f & st)


def supervise(spec: dict, layers: dict) -> None:
    """Without a PID namespace: stay outside as a subreaper and run the snippet in a child.

    Every orphan the snippet leaves is reparented here; when the snippet ends, or SIGTERM comes
    from the harness, every descendant is killed before this process exits. Meanwhile it measures
    the call's memory (without a cgroup) and its working directory's bytes (on the host's disk).
    """
    if not LINUX or _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return
    layers.update(reaper="subreaper", scratch="watch")
    layers["memory"] = layers["memory"] or "rss-watch"
    signal.signal(signal.SIGTERM, lambda *_: (watch.kill_descendants(), os._exit(128 + signal.SIGTERM)))
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        return
    me = os.getpid()
    status = watch.watch(child, spec, layers, lambda: watch.descendants(me), watch.kill_descendants)
    watch.kill_descendants()
    os._exit(status)


# --- 2, 3. limits and identity ---------------------------------------------------------------
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


def reachable_by(uid: int, paths: list[str]) -> bool:
    """Whether a process of `uid` (no group, no capability) can reach every path in `paths`."""
    for path in paths:
        parts = path.rstrip("/").split("/")
        for i in range(2, len(parts) + 1):
            try:
                st = os.stat("/".join(parts[:i]))
            except OSError:
                break
            bit = 0o001 if st.st_uid != uid else 0o100
            if os.path.isdir("/".join(parts[:i])) and not st.st_mode & bit:
                return False
    return True


def drop_privileges(root: bool, uid: int, spec: dict, private: bool) -> dict:
    """As root: become `uid` (else 65534) owning the working directory; everywhere: no capability
    left (CAP_DAC_READ_SEARCH only as described in the module docstring)."""
    keep = None
    if root and not private and not reachable_by(uid, python_paths()):
        keep = kernel.CAP_DAC_READ_SEARCH
    kernel.drop_bounding(keep)
    if root:
        _libc.prctl(kernel.PR_SET_KEEPCAPS, 1 if keep is not None else 0, 0, 0, 0)
        for candidate in (uid, NOBODY):
            try:
                os.chown(spec["workdir"], candidate, candidate)
                os.setgroups([])
                os.setresgid(candidate, candidate, candidate)
                os.setresuid(candidate, candidate, candidate)
                break
            except OSError:
                continue
    kernel.set_caps(keep)
    return {"uid": os.getuid(), "caps": kernel.held_caps()}


# --- 4-6. Landlock, seccomp, the Python socket message; the mode -----------------------------
def block_sockets() -> None:
    """A clear message for Python code (the kernel-level refusal is seccomp's or the namespace's)."""
    import socket

    base = socket.socket

    class NoNetSocket(base):  # type: ignore[misc,valid-type]
        def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
            if fileno is None:  # wrapping an existing descriptor (socketpair, fromfd) stays possible
                raise PermissionError("network access is disabled in the python tool")
            super().__init__(family, type, proto, fileno)

    NoNetSocket.__module__, NoNetSocket.__qualname__ = "socket", "socket"
    socket.socket = NoNetSocket  # type: ignore[misc]  (not _socket.socket: socket.socket's methods call it)


def guarantees(layers: dict, root: bool) -> dict:
    """Which properties hold, from the layers that took effect (see the README's sandbox section)."""
    private, netns, pidns = layers.get("mnt") == "private-root", layers.get("net") == "netns", layers.get("pid") == "pidns"
    confined_fs, no_sockets = layers.get("fs") == "landlock", layers.get("seccomp") == "seccomp"
    cannot_signal_out = root or layers.get("signals") == "scoped"
    caps_ok = not layers.get("caps") or (layers["caps"] == [kernel.CAP_DAC_READ_SEARCH] and confined_fs)
    return {
        "unprivileged": layers.get("uid", 0) != 0 and caps_ok,
        "reads_confined": private or confined_fs,
        "writes_confined": private or confined_fs,
        "run_dir_hidden": private or (root and confined_fs),
        "no_network": (netns or no_sockets) and (private or no_sockets),  # UNIX sockets: hidden or refused
        "nothing_survives": pidns or (layers.get("reaper") == "subreaper" and cannot_signal_out),
    }


def confine(spec: dict, layers: dict, root: bool, uid: int, in_use: int) -> None:
    """Layers 2-6 in the snippet's own process; exits with REFUSED if the result is too weak."""
    layers.update(set_limits(spec, in_use))
    private = layers.get("mnt") == "private-root"
    if LINUX:
        layers.update(drop_privileges(root, uid, spec, private))
    write = [spec["workdir"]] + DEVICES + (["/dev/shm"] if private else [])
    layers.update(kernel.landlock(read_paths(spec) + (["/proc"] if private else []), write))
    layers["seccomp"] = kernel.seccomp()
    block_sockets()
    layers["guarantees"] = guarantees(layers, root)
    layers["mode"], missing = sandbox_mode(layers)
    if missing and not spec.get("allow_weak"):
        layers["refused"] = f"this kernel/user cannot give the sandbox: {', '.join(missing)}"
    audit = spec.get("audit_fd")
    if audit is not None:  # the harness's own pipe, closed before the snippet's first line
        os.write(audit, (json.dumps(layers) + "\n").encode())
        os.close(audit)
    if layers.get("refused"):
        os._exit(REFUSED)


def sandbox_mode(layers: dict) -> tuple[str, list[str]]:
    """The mode and what it lacks. Namespaces alone leave the kernel's whole syscall surface
    (io_uring, mounts, ptrace, …) and every path inside the private root open: without seccomp or
    Landlock that is `namespaces-weak`, refused like `weak` unless allowed."""
    missing = sorted(k for k, v in layers["guarantees"].items() if not v)
    if missing:
        return "weak", missing
    if not layers.get("mnt"):
        return "landlock", []
    lacking = [name for name, held in (("seccomp", layers.get("seccomp") == "seccomp"),
                                       ("landlock", layers.get("fs") == "landlock")) if not held]
    return ("namespaces-weak", [f"namespaces without {' or '.join(lacking)}"]) if lacking else ("namespaces", [])


def main() -> None:
    spec = json.loads(sys.argv[1])
    root = os.geteuid() == 0 and LINUX
    uid = sandbox_uid() if root else os.getuid()
    in_use = watch.tasks_of_uid(uid)  # counted before a user namespace would hide who owns what
    layers: dict = {"net": None, "pid": None, "mnt": None, "memory": None, "pids": "rlimit", "scratch": None}
    layers.update(watch.join_cgroup(spec))  # before any fork: everything of the call is in it
    if LINUX and spec.get("namespaces", True):
        layers.update(unshare_all(root))
    if layers.get("ns_via"):
        enter_pid_namespace(spec, layers)
    else:
        supervise(spec, layers)
    confine(spec, layers, root, uid, in_use)
    os.chdir(spec["workdir"])
    sys.argv = ["<python>"]
    sys.path[0] = spec["workdir"]
    runpy.run_path(spec["code"], run_name="__main__")


if __name__ == "__main__":
    main()
