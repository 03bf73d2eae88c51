"""The python tool against hostile code: every limit is set before the snippet runs, and reported."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid

import pytest

from lifesearch_local.agent.config import PythonToolConfig, ToolsConfig
from lifesearch_local.agent.python_tool import PythonTool, run_snippet

LIMITS = dict(wall_s=10.0, cpu_s=2, memory_mb=256, max_procs=16, file_mb=1, max_output_chars=2000)


def run(code: str, **kw):
    cfg = PythonToolConfig(**{**LIMITS, **kw})
    tool = PythonTool(ToolsConfig(python=cfg))
    return asyncio.run(tool.run({"code": code}, task=None))


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


def test_plain_code_runs_with_the_limits_already_set():
    obs = run("import resource, os\n"
              "print(resource.getrlimit(resource.RLIMIT_AS)[0] >> 20, resource.getrlimit(resource.RLIMIT_CPU)[0])\n"
              "print(resource.getrlimit(resource.RLIMIT_NPROC)[0] > 0, os.getcwd().endswith('/work'))\n"
              "open('notes.txt', 'w').write('inside is fine'); print(open('notes.txt').read())")
    assert obs.ok and obs.failure is None
    assert "256 2\nTrue True\ninside is fine" in obs.text
    assert obs.data["returncode"] == 0 and obs.data["isolation"]


def test_infinite_loop_is_stopped_by_the_cpu_limit():
    obs = run("while True:\n    pass", cpu_s=1)
    assert not obs.ok and obs.failure == "cpu_limit" and obs.data["seconds"] < 10


def test_sleeping_forever_is_killed_at_the_wall_limit_and_nothing_survives():
    marker = f"lifesearch-test-{uuid.uuid4().hex}"
    code = ("import subprocess, sys, time\n"
            f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', '{marker}'], start_new_session=True)\n"
            "time.sleep(120)")
    obs = run(code, wall_s=1.5)
    assert obs.failure == "timeout" and 1.4 < obs.data["seconds"] < 8
    assert sandbox_processes(marker) == [] and sandbox_processes() == []


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
    assert sandbox_processes(marker) == [] and sandbox_processes() == []


def test_fork_bomb_is_contained():
    code = ("import os, time\n"
            "n = 0\n"
            "for i in range(500):\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(120); os._exit(0)\n"
            "    n += 1\n")
    obs = run(code, max_procs=20)
    assert obs.failure == "process_limit" and sandbox_processes() == []


def test_allocating_far_beyond_the_memory_limit_fails():
    obs = run("blocks = []\nfor i in range(100):\n    blocks.append(bytearray(64 << 20))\nprint('allocated', len(blocks) * 64, 'MiB')",
              memory_mb=256)
    assert obs.failure == "memory_limit" and "MemoryError" in obs.text and "allocated" not in obs.text


def test_writing_outside_the_working_directory_is_refused(tmp_path):
    target = tmp_path / "outside.txt"
    also = f"/tmp/lifesearch-escape-{uuid.uuid4().hex}"
    obs = run(f"open({str(also)!r}, 'w').write('x')\nopen({str(target)!r}, 'w').write('x')")
    assert obs.failure == "permission_denied" and "PermissionError" in obs.text
    assert not target.exists() and not os.path.exists(also)


def test_opening_a_socket_fails():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        obs = run(f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=3)\nprint('CONNECTED')")
        server.setblocking(False)
        with pytest.raises(BlockingIOError):  # the kernel would have queued a completed connection
            server.accept()
    assert not obs.ok and obs.failure == "network_blocked", obs.text
    assert "CONNECTED" not in obs.text


def test_without_namespaces_the_fallback_layers_still_block_the_network_and_writes(tmp_path):
    code = (f"try:\n    open({str(tmp_path / 'x')!r}, 'w')\nexcept PermissionError:\n    print('write refused')\n"
            "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 9), timeout=2)\n"
            "except OSError as e:\n    print('connect refused', type(e).__name__)")
    res = asyncio.run(run_snippet(code, PythonToolConfig(**LIMITS), namespaces=False))
    assert res.returncode == 0 and res.isolation["net"] in {None, "python-socket-blocked"}
    assert "write refused" in res.stdout and "connect refused PermissionError" in res.stdout
    assert res.isolation.get("tcp") == "landlock" or res.isolation["net"] == "python-socket-blocked"


def test_output_is_capped_both_on_disk_and_for_the_model():
    obs = run("import sys\nfor i in range(200000):\n    sys.stdout.write('x' * 100 + '\\n')", file_mb=1)
    assert obs.failure == "file_size_limit"
    assert len(obs.text) < 2500 and "characters cut" in obs.text


def test_the_temporary_directory_is_removed():
    res = asyncio.run(run_snippet("import os; print(os.getcwd())", PythonToolConfig(**LIMITS)))
    workdir = res.stdout.strip()
    assert workdir.endswith("/work") and not os.path.exists(workdir)


@pytest.mark.parametrize("code,kind", [("raise ValueError('bad')", "exit_status"), ("import sys; sys.exit(3)", "exit_status")])
def test_ordinary_errors_are_reported(code, kind):
    obs = run(code)
    assert obs.failure == kind and not obs.ok
