"""The python tool against hostile code: every limit is set before the snippet runs, and reported."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import platform
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from lifesearch_local.agent.config import PythonToolConfig, ToolsConfig
from lifesearch_local.agent.python_tool import RUNNER, PythonTool, SandboxResult, run_snippet, runner_spec
from lifesearch_local.agent.sandbox_host import read_audit

LIMITS = dict(wall_s=10.0, cpu_s=2, memory_mb=256, max_procs=16, file_mb=1, max_output_chars=2000)
LINUX = sys.platform.startswith("linux")
ROOT = LINUX and os.geteuid() == 0


def _kernel_probe(code: str) -> bool:
    """Run `code` in a fresh interpreter (it may change its own namespaces); True when it exits 0."""
    return subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, timeout=30).returncode == 0


def _landlock_abi() -> int:
    return max(0, ctypes.CDLL(None).syscall(444, None, 0, 1)) if LINUX else 0


# What this machine offers, probed independently of the code under test.
NAMESPACES = LINUX and _kernel_probe(
    "import ctypes, os, sys\n"
    "flags = 0x20000 | 0x40000000 | 0x20000000  # mount, network, PID\n"
    "sys.exit(ctypes.CDLL(None).unshare(flags | (0 if os.geteuid() == 0 else 0x10000000)))")
LANDLOCK = _landlock_abi()
SECCOMP = LINUX and os.path.exists("/proc/self/status") and "Seccomp:" in Path("/proc/self/status").read_text()
needs_namespaces = pytest.mark.skipif(not NAMESPACES, reason="the kernel refuses mount/network/PID namespaces here")
needs_fallback = pytest.mark.skipif(
    not (ROOT and LANDLOCK and SECCOMP),
    reason=f"the landlock mode needs root, Landlock and seccomp (root={ROOT}, landlock ABI={LANDLOCK}, seccomp={SECCOMP})")
MODES = [pytest.param(True, marks=needs_namespaces, id="namespaces"), pytest.param(False, marks=needs_fallback, id="landlock")]
STRONG = NAMESPACES or (ROOT and LANDLOCK and SECCOMP)


def _needs_a_strong_mode() -> None:
    if not STRONG:  # every call would fail as sandbox_unavailable (the weak mode is tested below)
        pytest.skip("neither namespaces nor root with Landlock and seccomp here: only the weak mode")


def run(code: str, **kw):
    _needs_a_strong_mode()
    cfg = PythonToolConfig(**{**LIMITS, **kw})
    tool = PythonTool(ToolsConfig(python=cfg))
    return asyncio.run(tool.run({"code": code}, task=None))


def snippet(code: str, namespaces: bool, **kw) -> SandboxResult:
    _needs_a_strong_mode()
    return asyncio.run(run_snippet(code, PythonToolConfig(**{**LIMITS, **kw}), namespaces=namespaces))


def sandbox_processes(marker: str = "sandbox_runner.py") -> list[int]:
    """Processes whose command line holds `marker` (every sandbox child inherits the runner's)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    out.append(int(pid))
        except OSError:
            continue
    return out


def call_processes(isolation: dict) -> list[int]:
    """Sandbox processes of one call: its runner and whatever runs as the call's own uid (as root
    each call has one, 100000 + the runner's pid mod 100000). Tests of other calls running at the
    same time (pytest -n 2) have other uids; without an own uid, every sandbox process counts."""
    uid = isolation.get("uid")
    if not uid or uid < 100000 or uid == os.getuid():
        return sandbox_processes()
    mine = []
    for pid in sandbox_processes():
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{pid}").st_uid == uid or pid % 100000 == uid - 100000:
                mine.append(pid)
    return mine


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_plain_code_runs_with_the_limits_already_set():
    obs = run("import resource, os\n"
              "print(resource.getrlimit(resource.RLIMIT_AS)[0] >> 20, resource.getrlimit(resource.RLIMIT_CPU)[0])\n"
              "print(resource.getrlimit(resource.RLIMIT_NPROC)[0] > 0, os.getcwd().endswith('/work'))\n"
              "open('notes.txt', 'w').write('inside is fine'); print(open('notes.txt').read())")
    assert obs.ok and obs.failure is None
    assert "256 2\nTrue True\ninside is fine" in obs.text
    assert obs.data["returncode"] == 0 and obs.data["isolation"]["mode"] in {"namespaces", "landlock"}


def test_infinite_loop_is_stopped_by_the_cpu_limit():
    obs = run("while True:\n    pass", cpu_s=1)
    assert not obs.ok and obs.failure == "cpu_limit"  # the CPU limit, not the wall limit, ended it


@pytest.mark.parametrize("namespaces", MODES)
def test_sleeping_forever_is_killed_at_the_wall_limit_and_nothing_survives(namespaces):
    marker = f"lifesearch-test-{uuid.uuid4().hex}"
    code = ("import subprocess, sys, time\n"
            f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', '{marker}'], start_new_session=True)\n"
            "time.sleep(120)")
    try:
        res = snippet(code, namespaces, wall_s=1.5)
        assert res.timed_out and 1.4 < res.seconds < 60  # at the wall limit, not after the 120 s sleep
        assert sandbox_processes(marker) == [] and call_processes(res.isolation) == []
    finally:
        kill_all(sandbox_processes(marker))


@pytest.mark.parametrize("namespaces", MODES)
def test_a_double_forked_setsid_daemon_does_not_outlive_the_call(namespaces):
    marker = f"lifesearch-test-{uuid.uuid4().hex}"
    code = ("import os, sys, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', '{marker}'])\n"
            "    os._exit(0)\n"
            "time.sleep(0.3)\n"
            "print('parent done')")
    try:
        res = snippet(code, namespaces)
        assert res.returncode == 0 and "parent done" in res.stdout, res.stderr
        assert sandbox_processes(marker) == [] and call_processes(res.isolation) == []
    finally:
        kill_all(sandbox_processes(marker))


def test_process_spawning_loop_hits_the_process_limit_and_is_cleaned_up():
    marker = f"lifesearch-test-{uuid.uuid4().hex}"
    code = ("import subprocess, sys\n"
            "procs = []\n"
            "for i in range(300):\n"
            f"    procs.append(subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', '{marker}']))\n"
            "    print(len(procs), flush=True)\n")
    obs = run(code, max_procs=16)
    assert obs.failure == "process_limit", obs.text
    spawned = int(obs.text.split("stdout:\n")[1].split("\nstderr")[0].split()[-1])
    assert spawned < 16  # far fewer than the 300 the loop wanted
    assert "BlockingIOError" in obs.text
    assert sandbox_processes(marker) == [] and call_processes(obs.data["isolation"]) == []


def test_fork_bomb_is_contained():
    code = ("import os, time\n"
            "n = 0\n"
            "for i in range(500):\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(120); os._exit(0)\n"
            "    n += 1\n")
    obs = run(code, max_procs=20)
    assert obs.failure == "process_limit" and call_processes(obs.data["isolation"]) == []


def test_allocating_far_beyond_the_memory_limit_fails():
    obs = run("blocks = []\nfor i in range(100):\n    blocks.append(bytearray(64 << 20))\nprint('allocated', len(blocks) * 64, 'MiB')",
              memory_mb=256)
    assert obs.failure == "memory_limit" and "MemoryError" in obs.text and "allocated" not in obs.text


def test_writing_outside_the_working_directory_is_refused(tmp_path):
    target = tmp_path / "outside.txt"
    also = f"/tmp/lifesearch-escape-{uuid.uuid4().hex}"
    obs = run(f"open({str(also)!r}, 'w').write('x')\nopen({str(target)!r}, 'w').write('x')")
    assert obs.failure == "permission_denied" and ("PermissionError" in obs.text or "Read-only file system" in obs.text)
    assert not target.exists() and not os.path.exists(also)


PROBE_READS = """
import os
def probe(name, path):
    try:
        with open(path, 'rb') as f:
            print(name, 'READ', f.read(40))
    except OSError as e:
        print(name, 'REFUSED', type(e).__name__)
probe('passwd', '/etc/passwd')
probe('run_file', {run_file!r})
probe('home_canary', {canary!r})
probe('stdlib', os.__file__)
"""


@pytest.mark.parametrize("namespaces", MODES)
def test_reads_are_confined_to_the_python_installation_and_the_working_directory(namespaces, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_file = run_dir / "judgments.jsonl"
    run_file.write_text('{"secret": "run-dir"}\n')
    run_file.chmod(0o600)
    canary = Path.home() / f".lifesearch-canary-{uuid.uuid4().hex}"
    canary.write_text("home canary")
    canary.chmod(0o644)  # readable by anyone: only the sandbox's confinement can refuse it
    try:
        res = snippet(PROBE_READS.format(run_file=str(run_file), canary=str(canary)), namespaces)
    finally:
        canary.unlink()
    assert res.returncode == 0, res.stderr
    lines = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert lines["stdlib"].startswith("READ"), res.stdout  # the snippet still has its Python
    for name in ("passwd", "run_file", "home_canary"):
        assert lines[name].startswith("REFUSED"), (name, res.stdout)
    assert res.isolation["guarantees"]["reads_confined"] is True


CAPS = """
import ctypes
libc = ctypes.CDLL(None)
class Header(ctypes.Structure):
    _fields_ = [('version', ctypes.c_uint32), ('pid', ctypes.c_int)]
class Data(ctypes.Structure):
    _fields_ = [('e', ctypes.c_uint32), ('p', ctypes.c_uint32), ('i', ctypes.c_uint32)]
d = (Data * 2)()
libc.capget(ctypes.byref(Header(0x20080522, 0)), d)
held = {c for c in range(64) if (d[c // 32].e | d[c // 32].p | d[c // 32].i) >> (c % 32) & 1}
bounding = {c for c in range(64) if libc.prctl(23, c, 0, 0, 0) == 1}
ambient = {c for c in range(64) if libc.prctl(47, 1, c, 0, 0) == 1}
print(sorted(held), sorted(bounding), sorted(ambient))
"""


def _reachable_by_others(*paths: str) -> bool:
    for path in paths:
        parts = os.path.realpath(path).split("/")
        if not all(os.stat("/".join(parts[:i]) or "/").st_mode & stat.S_IXOTH for i in range(1, len(parts))):
            return False
    return True


@pytest.mark.parametrize("namespaces", MODES)
def test_every_capability_is_dropped(namespaces):
    res = snippet(CAPS, namespaces)
    assert res.returncode == 0, res.stderr
    # Without a private root, an interpreter the sandbox uid cannot reach keeps CAP_DAC_READ_SEARCH
    # (2), confined by Landlock to the readable paths; otherwise nothing is left, bounding set included.
    kept = [] if namespaces or _reachable_by_others(sys.prefix, sys.base_prefix, sys.executable) else [2]
    assert res.stdout.strip() == f"{kept} {kept} {kept}", res.stdout


SOCKETS = """
import _socket
def attempt(name, family, kind, address):
    try:
        s = _socket.socket(family, kind)  # the C module: no Python-level refusal in the way
    except OSError as e:
        print(name, 'SOCKET-REFUSED', e.errno); return
    try:
        s.settimeout(2)
        s.connect(address) if kind == _socket.SOCK_STREAM else s.sendto(b'leak', address)
        print(name, 'REACHED')
    except OSError as e:
        print(name, 'REFUSED', e.errno)
attempt('unix_path', _socket.AF_UNIX, _socket.SOCK_STREAM, {path!r})
attempt('unix_abstract', _socket.AF_UNIX, _socket.SOCK_STREAM, {abstract!r})
attempt('udp', _socket.AF_INET, _socket.SOCK_DGRAM, ('127.0.0.1', {udp_port}))
for family in (_socket.AF_INET, _socket.AF_INET6, _socket.AF_UNIX, _socket.AF_NETLINK):
    try:
        _socket.socket(family, _socket.SOCK_DGRAM)
        print('family', family, 'CREATED')
    except OSError as e:
        print('family', family, 'REFUSED', e.errno)
"""


@pytest.mark.parametrize("namespaces", MODES)
def test_host_unix_sockets_and_udp_are_unreachable(namespaces):
    folder = Path(tempfile.mkdtemp(prefix="lifesearch-sock-"))
    folder.chmod(0o755)
    path, abstract = str(folder / "host.sock"), f"\0lifesearch-test-{uuid.uuid4().hex}"
    servers = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2)]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for server, address in zip(servers, (path, abstract)):
            server.bind(address)
            server.listen(4)
            server.setblocking(False)
        os.chmod(path, 0o777)  # anyone may connect: only the sandbox stands in the way
        udp.bind(("127.0.0.1", 0))
        udp.settimeout(0.3)
        res = snippet(SOCKETS.format(path=path, abstract=abstract, udp_port=udp.getsockname()[1]), namespaces)
        assert res.returncode == 0, res.stderr
        assert "REACHED" not in res.stdout and res.stdout.count("REFUSED") == 7, res.stdout
        for server in servers:
            with pytest.raises(BlockingIOError):  # the kernel would have queued a completed connection
                server.accept()
        with pytest.raises(TimeoutError):
            udp.recvfrom(100)
        if not namespaces:  # the landlock mode relies on seccomp refusing socket() itself
            assert res.stdout.count("SOCKET-REFUSED 1") == 3 and "CREATED" not in res.stdout, res.stdout
    finally:
        for s in (*servers, udp):
            s.close()
        shutil.rmtree(folder)


SYSCALLS = """
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
def check(name, result):
    print(name, result, ctypes.get_errno() if result == -1 else 0)
check('io_uring_setup', libc.syscall(425, 1, ctypes.create_string_buffer(120)))  # same number everywhere
check('unshare', libc.unshare(0x10000000))  # a user namespace would give back every capability inside it
check('clone3', libc.syscall(435, None, 0))
pid = os.fork()
if pid == 0:
    os._exit(7)
t = threading.Thread(target=lambda: None); t.start(); t.join()
print('fork+thread', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.parametrize("namespaces", MODES)
def test_io_uring_and_namespace_syscalls_are_refused_but_fork_and_threads_work(namespaces):
    if not SECCOMP:
        pytest.skip("the kernel has no seccomp")
    res = snippet(SYSCALLS, namespaces)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["io_uring_setup -1 1", "unshare -1 1", "clone3 -1 38", "fork+thread 7"], res.stdout


def test_opening_a_socket_fails():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        obs = run(f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=3)\nprint('CONNECTED')")
        server.setblocking(False)
        with pytest.raises(BlockingIOError):  # the kernel would have queued a completed connection
            server.accept()
    assert not obs.ok and obs.failure == "network_blocked", obs.text
    assert "CONNECTED" not in obs.text


def test_socketpair_and_asyncio_still_work():
    obs = run("import asyncio, socket\na, b = socket.socketpair()\na.send(b'x'); print(b.recv(1))\n"
              "async def main():\n    await asyncio.sleep(0)\n    return 'loop ok'\nprint(asyncio.run(main()))")
    assert obs.ok and "b'x'\nloop ok" in obs.text, obs.text


@needs_fallback
def test_without_namespaces_the_fallback_layers_still_block_the_network_and_writes(tmp_path):
    code = (f"try:\n    open({str(tmp_path / 'x')!r}, 'w')\nexcept PermissionError:\n    print('write refused')\n"
            "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 9), timeout=2)\n"
            "except OSError as e:\n    print('connect refused', type(e).__name__)")
    res = snippet(code, namespaces=False)
    assert res.returncode == 0 and res.isolation["mode"] == "landlock" and res.isolation["net"] is None
    assert "write refused" in res.stdout and "connect refused PermissionError" in res.stdout
    assert res.isolation["seccomp"] == "seccomp" and res.isolation["reaper"] == "subreaper"


def test_output_is_capped_both_on_disk_and_for_the_model():
    obs = run("import sys\nfor i in range(200000):\n    sys.stdout.write('x' * 100 + '\\n')", file_mb=1)
    assert obs.failure == "file_size_limit"
    assert len(obs.text) < 2500 and "characters cut" in obs.text


def run_runner(base: Path, code: str, namespaces: bool, launch=None, prefix: tuple[str, ...] = (), chown: int | None = None,
               **kw) -> tuple[subprocess.CompletedProcess, dict]:
    """The runner started directly (after `prefix`, e.g. a wrapper) with an audit pipe, as the harness does."""
    read_end, write_end = os.pipe()
    try:
        spec, env = runner_spec(base, code, PythonToolConfig(**{**LIMITS, **kw}), namespaces=namespaces, audit_fd=write_end)
        for path in (base, *base.rglob("*")) if chown is not None else ():
            os.chown(path, chown, chown)
        argv = [sys.executable, "-I", *prefix, str(RUNNER), json.dumps(spec)]
        launch = launch or (lambda argv, **opts: subprocess.run(argv, capture_output=True, text=True, timeout=60, **opts))
        proc = launch(argv, env=env, cwd=spec["workdir"], pass_fds=(write_end,))
        os.close(write_end)
        return proc, read_audit(read_end)
    finally:
        with contextlib.suppress(OSError):
            os.close(write_end)
        os.close(read_end)


def test_the_temporary_directory_is_removed():
    res = snippet("import os; print(os.getcwd())", namespaces=True)
    workdir = res.stdout.strip()
    assert workdir.endswith("/work") and not os.path.exists(workdir)


# --- the call's resources: per call, not per file or per process --------------------------------
NESTED = ("import os\nprint(os.getcwd(), flush=True)\n"
          "for i in range(1500):\n    os.mkdir('d')\n    os.chdir('d')\n"
          "open('deepest.txt', 'w').write('x' * 100000)\nprint('nested 1500')")


@pytest.mark.parametrize("namespaces", MODES)
def test_1500_nested_directories_leave_nothing_behind(namespaces):
    res = snippet(NESTED, namespaces)
    assert res.returncode == 0 and "nested 1500" in res.stdout, res.stderr
    workdir = res.stdout.splitlines()[0]
    assert workdir.endswith("/work") and not os.path.exists(os.path.dirname(workdir))


WRITE_64_FILES = ("for i in range(64):\n"
                  "    with open(f'f{i}', 'wb') as f:\n"
                  "        for _ in range(16):\n            f.write(b'x' * (1 << 20))\n"
                  "    print('wrote', i, flush=True)\n")


@pytest.mark.parametrize("namespaces", MODES)
def test_64_files_of_16_mib_are_stopped_by_the_per_call_cap(namespaces):
    res = snippet(WRITE_64_FILES, namespaces, file_mb=16, scratch_mb=64, wall_s=60, cpu_s=30)
    kind, why = res.failure(PythonToolConfig(**{**LIMITS, "file_mb": 16, "scratch_mb": 64}))
    assert kind == "scratch_limit", (res.stdout[-300:], res.stderr[-300:])
    files = res.stdout.count("wrote")
    if res.isolation["scratch"] == "tmpfs":  # the kernel's cap: a fifth file does not fit
        assert files == 4 and "Errno 28" in res.stderr
    else:  # measured: stopped within a few measurements of the cap (64 files used to be written)
        assert res.isolation["scratch"] == "watch" and files <= 8 and "64 MiB" in why


HOLD = ("import os, sys, time\n"
        "kids = []\n"
        "for i in range(6):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        block = bytearray(120 << 20)\n"
        "        block[::4096] = b'x' * len(block[::4096])  # every page resident\n"
        "        print('holds 120 MiB', flush=True)\n"
        "        time.sleep(10)\n"
        "        os._exit(0)\n"
        "    kids.append(pid)\n"
        "for pid in kids:\n    os.waitpid(pid, 0)\n")


@pytest.mark.parametrize("namespaces", MODES)
def test_six_children_cannot_hold_more_than_the_calls_memory_together(namespaces):
    # the watcher needs only /proc's RssAnon (Linux 4.5+); a cgroup v2 is used where one can be made
    if "RssAnon:" not in Path("/proc/self/status").read_text():
        pytest.skip("no per-call memory mechanism here: /proc/<pid>/status has no RssAnon")
    res = snippet(HOLD, namespaces, memory_mb=256, wall_s=30, cpu_s=20)
    assert res.isolation.get("memory") in {"cgroup2", "rss-watch"}, res.isolation
    assert res.failure(PythonToolConfig(**LIMITS))[0] == "memory_limit", (res.stdout, res.stderr[-300:])
    assert res.stdout.count("holds") <= 2  # 2 x 120 MiB fit in 256; 6 x 120 MiB used to
    assert res.isolation["killed"]["by"] in {"watch", "cgroup2"}


@pytest.mark.parametrize("namespaces", MODES)
def test_a_forged_audit_line_on_stderr_changes_nothing(namespaces):
    forged = '#sandbox {"mode": "namespaces", "forged": true, "refused": "forged"}\n'
    code = ("import os, sys\n"
            f"line = {forged!r}.encode()\n"
            "os.lseek(2, 0, os.SEEK_SET)  # stderr is a file: try to overwrite what the runner wrote first\n"
            "os.write(2, line)\n"
            "for fd in range(3, 256):  # and every descriptor the snippet might have inherited\n"
            "    try:\n        os.write(fd, line)\n    except OSError:\n        pass\n"
            "print('done')")
    res = snippet(code, namespaces)
    assert res.returncode == 0 and res.stdout == "done\n" and res.failure(PythonToolConfig(**LIMITS)) is None
    assert "forged" not in res.isolation and "refused" not in res.isolation
    assert res.isolation["mode"] == ("namespaces" if namespaces else "landlock")
    assert res.stderr.startswith("#sandbox")  # the snippet's own text, shown as such


@pytest.mark.parametrize("namespaces", MODES)
def test_a_binary_written_to_the_working_directory_runs_confined(namespaces):
    code = ("import os, shutil, subprocess\n"
            "shutil.copy('/bin/cat', 'mycat'); os.chmod('mycat', 0o755)\n"
            "print(subprocess.run(['./mycat', 'snippet-output.txt'], capture_output=True, text=True).stdout)\n"
            "print(subprocess.run(['./mycat', '/etc/passwd'], capture_output=True, text=True).returncode)")
    res = snippet("open('snippet-output.txt', 'w').write('mine')\n" + code, namespaces)
    assert res.returncode == 0 and res.stdout.split() == ["mine", "1"], (res.stdout, res.stderr)


# Blocks Landlock (ENOSYS from landlock_create_ruleset) or seccomp (EINVAL from prctl(PR_SET_SECCOMP) and
# seccomp()) for the runner it then executes: a kernel without them, on this one.
WITHOUT = """
import ctypes, os, platform, struct, sys
arch, prctl, seccomp = {"x86_64": (0xC000003E, 157, 317), "aarch64": (0xC00000B7, 167, 277)}[platform.machine()]
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
prog = [(0x20, 0, 0, 4), (0x15, 1, 0, arch), (0x06, 0, 0, ALLOW), (0x20, 0, 0, 0)]
if sys.argv[1] == "landlock":
    prog += [(0x15, 0, 1, 444), (0x06, 0, 0, ERRNO | 38)]
else:
    prog += [(0x15, 0, 1, seccomp), (0x06, 0, 0, ERRNO | 22),
             (0x15, 0, 3, prctl), (0x20, 0, 0, 16), (0x15, 0, 1, 22), (0x06, 0, 0, ERRNO | 22)]
prog += [(0x06, 0, 0, ALLOW)]
raw = b"".join(struct.pack("=HBBI", *i) for i in prog)
buf = ctypes.create_string_buffer(raw, len(raw))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
libc = ctypes.CDLL(None)
libc.prctl(38, 1, 0, 0, 0)
assert libc.prctl(22, 2, ctypes.byref(Fprog(len(prog), ctypes.addressof(buf))), 0, 0) == 0
os.execv(sys.executable, [sys.executable, "-I", *sys.argv[2:]])
"""


@needs_namespaces
@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="the test's filter knows x86_64 and aarch64")
@pytest.mark.parametrize("missing", ["landlock", "seccomp"])
def test_namespaces_without_landlock_or_seccomp_run_only_when_allowed(tmp_path, missing):
    _needs_a_strong_mode()
    for allowed in (False, True):
        base = tmp_path / f"allowed-{allowed}"
        base.mkdir()
        proc, record = run_runner(base, "print('ran')", True, prefix=("-c", WITHOUT, missing),
                                  allow_weak_sandbox=allowed)
        assert record["mode"] == "namespaces-weak", (record, proc.stderr)
        assert record["fs" if missing == "landlock" else "seccomp"] is None
        if allowed:
            assert proc.returncode == 0 and proc.stdout == "ran\n" and "refused" not in record
        else:
            assert proc.returncode == 3 and proc.stdout == "" and f"without {missing}" in record["refused"]
            res = SandboxResult(proc.returncode, "", "", False, 0.1, record)
            assert res.failure(PythonToolConfig())[0] == "sandbox_unavailable"


@pytest.mark.parametrize("code,kind", [("raise ValueError('bad')", "exit_status"), ("import sys; sys.exit(3)", "exit_status")])
def test_ordinary_errors_are_reported(code, kind):
    obs = run(code)
    assert obs.failure == kind and not obs.ok


def test_a_refused_sandbox_is_reported_with_its_fix():
    res = SandboxResult(3, "", "", False, 0.1, {"mode": "weak", "refused": "this kernel/user cannot give the sandbox: x"})
    kind, why = res.failure(PythonToolConfig())
    assert kind == "sandbox_unavailable" and "allow_weak_sandbox: true" in why


# --- a harness that is not root ---------------------------------------------------------------
UNPRIVILEGED = 61_234  # a uid no account uses on a test machine


def _as_user(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, user=UNPRIVILEGED, group=UNPRIVILEGED, extra_groups=[], capture_output=True,
                          text=True, timeout=30, **kw)


def _unprivileged_python() -> str | None:
    """An interpreter an unprivileged uid can run (ours may live under /root), for the runner."""
    for python in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        try:
            if python and _as_user([python, "-I", "-c", "import ctypes, json"]).returncode == 0:
                return python
        except OSError:  # not there, or not reachable by that uid
            continue
    return None


UNPRIVILEGED_PYTHON = _unprivileged_python() if ROOT else None
needs_user = pytest.mark.skipif(
    UNPRIVILEGED_PYTHON is None,
    reason="needs root (to start the harness as another uid) and an interpreter that uid can run")


@pytest.fixture
def user_tmp():
    """A folder of the unprivileged uid where it can reach it (pytest's tmp_path is under a 0700 folder)."""
    folder = Path(tempfile.mkdtemp(prefix="lifesearch-user-"))
    os.chown(folder, UNPRIVILEGED, UNPRIVILEGED)
    yield folder
    shutil.rmtree(folder)


def _run_as_user(tmp: Path, code: str, namespaces: bool, **kw) -> tuple[subprocess.CompletedProcess, dict]:
    base = tmp / f"sandbox-{uuid.uuid4().hex[:8]}"
    base.mkdir()
    return run_runner(base, code, namespaces, launch=lambda argv, **opts: _as_user(
        [UNPRIVILEGED_PYTHON, *argv[1:]], **opts), chown=UNPRIVILEGED, **kw)


USER_NAMESPACES = bool(UNPRIVILEGED_PYTHON) and _as_user(
    [UNPRIVILEGED_PYTHON, "-I", "-c", "import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare(0x10000000 | 0x60020000))"]
).returncode == 0


@needs_user
@pytest.mark.skipif(not USER_NAMESPACES, reason="the kernel refuses unprivileged user namespaces here")
def test_a_non_root_harness_hides_the_run_directory(user_tmp):
    run_dir = user_tmp / "run"
    run_dir.mkdir()
    run_file = run_dir / "judgments.jsonl"
    run_file.write_text("{}\n")
    run_file.chmod(0o644)
    os.chown(run_dir, UNPRIVILEGED, UNPRIVILEGED)
    os.chown(run_file, UNPRIVILEGED, UNPRIVILEGED)  # the harness's own files: same uid as the snippet
    code = ("import os\n"
            f"for name, act in (('chmod', lambda: os.chmod({str(run_file)!r}, 0o666)), ('list', lambda: os.listdir({str(run_dir)!r})),\n"
            f"                  ('read', lambda: open({str(run_file)!r}).read()), ('passwd', lambda: open('/etc/passwd').read())):\n"
            "    try:\n        act(); print(name, 'DONE')\n    except OSError as e:\n        print(name, 'REFUSED', type(e).__name__)")
    proc, isolation = _run_as_user(user_tmp, code, namespaces=True)
    assert proc.returncode == 0, proc.stderr
    assert "DONE" not in proc.stdout and proc.stdout.count("REFUSED") == 4, proc.stdout
    assert stat.S_IMODE(run_file.stat().st_mode) == 0o644
    assert isolation["mode"] == "namespaces" and isolation["ns_via"] == "userns" and isolation["caps"] == []


@needs_user
def test_the_weak_mode_runs_only_when_allowed(user_tmp):
    # Not root and no namespaces: the snippet shares the harness's uid and could chmod its files.
    proc, isolation = _run_as_user(user_tmp, "print('ran')", namespaces=False)
    assert proc.returncode == 3 and "ran" not in proc.stdout
    assert isolation["mode"] == "weak" and "run_dir_hidden" in isolation["refused"]
    proc, isolation = _run_as_user(user_tmp, "print('ran')", namespaces=False, allow_weak_sandbox=True)
    assert proc.returncode == 0 and proc.stdout == "ran\n" and isolation["mode"] == "weak"
    assert "refused" not in isolation
