"""Kernel confinement for the python tool's sandbox through ctypes: Landlock, seccomp, capabilities.

Standard library only: the sandbox runner loads this file by path before it confines itself.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

LINUX = sys.platform.startswith("linux")
_libc = ctypes.CDLL(None, use_errno=True)

# --- Landlock (syscall numbers are the same on every architecture: generic table) ------------
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FS_V1 = sum(1 << b for b in range(13))  # execute … make_sym: every ABI 1 right
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV  # valid on a file rule
READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_READ, PR_CAPBSET_DROP, PR_SET_KEEPCAPS, PR_CAP_AMBIENT = 38, 23, 24, 8, 47
CAP_DAC_READ_SEARCH = 2


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0 where there is none)."""
    return max(0, _libc.syscall(SYS_CREATE_RULESET, None, 0, 1)) if LINUX else 0


def landlock(read: list[str], write: list[str]) -> dict:
    """Reads (and execution) only beneath `read`; reads, writes and execution only beneath `write`
    (a binary written there runs, confined); no TCP bind/connect (ABI 4+); no signal or abstract
    UNIX socket out of the sandbox (ABI 6+)."""
    abi = landlock_abi()
    if abi < 1:
        return {"fs": None, "landlock_abi": abi}
    handled = FS_V1 | (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0) | (FS_IOCTL_DEV if abi >= 5 else 0)
    net, scoped = (0b11 if abi >= 4 else 0), (0b11 if abi >= 6 else 0)
    attr = (ctypes.c_uint64 * 3)(handled, net, scoped)
    ruleset = _libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), 8 if abi < 4 else 16 if abi < 6 else 24, 0)
    if ruleset < 0:
        return {"fs": None, "landlock_abi": abi}
    try:
        for paths, access in ((read, READ & handled), (write, handled)):
            for path in paths:
                _add_rule(ruleset, path, access)
        _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        ok = _libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) == 0
    finally:
        os.close(ruleset)
    return {"fs": "landlock" if ok else None, "tcp": "landlock" if ok and net else None,
            "signals": "scoped" if ok and scoped else None, "landlock_abi": abi}


def _add_rule(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # absent here: nothing to allow
    try:
        if not os.path.isdir(path):
            access &= FILE_RIGHTS
        _libc.syscall(SYS_ADD_RULE, ruleset, 1, ctypes.byref(_PathBeneath(access, fd)), 0)
    finally:
        os.close(fd)


# --- capabilities ----------------------------------------------------------------------------
class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_bounding(keep: int | None) -> None:
    """Empty the bounding set (but `keep`): no execve can gain a capability back."""
    for cap in range(64):
        if cap != keep:
            _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails past the last cap: harmless


def set_caps(keep: int | None) -> bool:
    """Effective, permitted and inheritable sets reduced to `keep` (or emptied); `keep` made ambient
    so that the snippet's own subprocesses keep it. Must follow the uid switch."""
    bit = 1 << keep if keep is not None else 0
    data = (_CapData * 2)(_CapData(bit, bit, bit), _CapData(0, 0, 0))
    ok = _libc.capset(ctypes.byref(_CapHeader(0x20080522, 0)), data) == 0
    return ok and (keep is None or _libc.prctl(PR_CAP_AMBIENT, 2, keep, 0, 0) == 0)


def held_caps() -> list[int]:
    """Capabilities in any of the effective, permitted, bounding or ambient sets of this process."""
    data = (_CapData * 2)()
    _libc.capget(ctypes.byref(_CapHeader(0x20080522, 0)), data)
    held = {c for c in range(64) if (data[c // 32].effective | data[c // 32].permitted) >> (c % 32) & 1}
    held |= {c for c in range(64) if _libc.prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1}
    held |= {c for c in range(64) if _libc.prctl(PR_CAP_AMBIENT, 1, c, 0, 0) == 1}
    return sorted(held)


# --- seccomp ---------------------------------------------------------------------------------
# (audit arch, {syscall name: number}) per architecture; syscalls the snippet never needs.
_ARCHES = {
    "x86_64": (0xC000003E, dict(
        socket=41, socketpair=53, clone=56, clone3=435, ptrace=101, pivot_root=155, chroot=161, mount=165,
        umount2=166, add_key=248, request_key=249, keyctl=250, unshare=272, perf_event_open=298,
        name_to_handle_at=303, open_by_handle_at=304, setns=308, process_vm_readv=310, process_vm_writev=311,
        bpf=321, userfaultfd=323, io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
        open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433, mount_setattr=442)),
    "aarch64": (0xC00000B7, dict(
        socket=198, socketpair=199, clone=220, clone3=435, ptrace=117, pivot_root=41, chroot=51, mount=40,
        umount2=39, add_key=217, request_key=218, keyctl=219, unshare=97, perf_event_open=241,
        name_to_handle_at=264, open_by_handle_at=265, setns=268, process_vm_readv=270, process_vm_writev=271,
        bpf=280, userfaultfd=282, io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
        open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433, mount_setattr=442)),
}
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
EPERM, ENOSYS, AF_UNIX = 1, 38, 1
CLONE_NEW_ANY = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
X32_BIT = 0x40000000


def _seccomp_program(arch: int, nr: dict[str, int], x86: bool) -> list[tuple[int, int, int, int]]:
    """Every socket() refused (EPERM); socketpair() only for AF_UNIX (an anonymous pair reaches
    nothing, and asyncio and multiprocessing need it); io_uring (which opens sockets past this
    filter), namespaces, mounts, keyrings, bpf, ptrace and file handles refused; clone3 ENOSYS
    (its flags are out of the filter's reach: libc falls back to clone, whose flags are checked);
    any other architecture's syscalls refused. Every other syscall allowed."""
    eperm, plain = _ERRNO | EPERM, [n for k, n in nr.items() if k not in ("socketpair", "clone", "clone3")]
    prog = [(_LD_ABS, 0, 0, 4), (_JEQ, 1, 0, arch), (_RET, 0, 0, eperm), (_LD_ABS, 0, 0, 0)]
    if x86:  # x32 syscalls share the arch value: refuse them by their number bit
        prog += [(_JGE, 0, 1, X32_BIT), (_RET, 0, 0, eperm)]
    for n in plain:
        prog += [(_JEQ, 0, 1, n), (_RET, 0, 0, eperm)]
    prog += [(_JEQ, 0, 4, nr["socketpair"]), (_LD_ABS, 0, 0, 16), (_JEQ, 0, 1, AF_UNIX),
             (_RET, 0, 0, _ALLOW), (_RET, 0, 0, eperm)]
    prog += [(_JEQ, 0, 4, nr["clone"]), (_LD_ABS, 0, 0, 16), (_JSET, 0, 1, CLONE_NEW_ANY),
             (_RET, 0, 0, eperm), (_RET, 0, 0, _ALLOW)]
    prog += [(_JEQ, 0, 1, nr["clone3"]), (_RET, 0, 0, _ERRNO | ENOSYS), (_RET, 0, 0, _ALLOW)]
    return prog


def seccomp() -> str | None:
    """Install the filter above on this process and every descendant; None where unsupported."""
    machine = platform.machine()
    if not LINUX or machine not in _ARCHES or sys.byteorder != "little":
        return None
    arch, nr = _ARCHES[machine]
    prog = _seccomp_program(arch, nr, machine == "x86_64")
    raw = b"".join(struct.pack("=HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    ok = _libc.prctl(22, 2, ctypes.byref(Fprog(len(prog), ctypes.addressof(buf))), 0, 0) == 0  # PR_SET_SECCOMP, FILTER
    return "seccomp" if ok else None
