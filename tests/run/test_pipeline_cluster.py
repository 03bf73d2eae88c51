"""A multi-node Ray cluster simulated on one machine: a head and two workers, each started with
`ray start` as its own process group with its own resources. `lifesearch run` spreads its
replicas over the workers, survives SIGTERM (then resumes) and the loss of a worker node."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from lifesearch_local.records import Judgment, Report
from lifesearch_local.rundir.jsonl import read_records
from tests.helpers.inputs import ROOT

RAY = str(Path(sys.executable).parent / "ray")
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(address, env, {name: Popen}); Ray ≥ 2.59 wants the same auth token on every node."""
    ip = socket.gethostbyname(socket.gethostname())
    port = free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    logs = tmp_path_factory.mktemp("raylogs")
    procs: dict[str, subprocess.Popen] = {}

    def start(name: str, *args: str) -> None:
        with open(logs / f"{name}.log", "w") as log:  # the child keeps its own copy of the descriptor
            procs[name] = subprocess.Popen([RAY, "start", *args, "--block", "--disable-usage-stats"], env=env,
                                           stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True)  # its own group: killpg takes the whole node

    def wait(n: int) -> None:
        r = subprocess.run([sys.executable, "-m", "lifesearch_local", "cluster", "wait", "--nodes", str(n),
                            "--timeout", "180", "--address", f"{ip}:{port}"], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:] + "".join(p.read_text()[-2000:] for p in logs.iterdir())

    # The head offers no CPU: each 1-CPU replica must go to a worker, one per worker.
    start("head", "--head", f"--port={port}", "--num-cpus=0", f"--temp-dir=/tmp/lsr{os.getpid()}",
          "--include-dashboard=false")
    wait(1)
    for i, name in enumerate(("w1", "w2"), start=2):  # one at a time: concurrent joins time out here
        start(name, f"--address={ip}:{port}", "--num-cpus=1", f'--resources={{"{name}": 1}}')
        wait(i)
    yield f"{ip}:{port}", env, procs
    for p in procs.values():  # no graceful drain (30 s a node): the test is over
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=60)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc), children first-found order."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def config(tmp_path: Path, address: str) -> Path:
    """configs/cpu_small.yaml pointed at the cluster, with the sample reports added so the judge
    phase lasts long enough to be interrupted."""
    cfg = yaml.safe_load((ROOT / "configs" / "cpu_small.yaml").read_text())
    cfg.update(out=str(tmp_path / "run"), reports=str(ROOT / "data/sample/reports.jsonl"))
    cfg.pop("reporteval", None)
    cfg["judge"]["groups_per_call"] = 2
    cfg["ray"] = {"address": address, "replicas": 2, "num_cpus_per_replica": 1, "call_timeout_s": 120,
                  "startup_timeout_s": 120}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def start_run(cfg: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lifesearch_local", "run", "--config", str(cfg), "--quiet"],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_judgments(run: Path, proc: subprocess.Popen, n: int = 1) -> None:
    f, deadline = run / "judgments.jsonl", time.monotonic() + 300
    while (not f.exists() or f.read_text().count("\n") < n) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, "the run ended before it could be interrupted: " + proc.stderr.read()[-2000:]


def expected_judgments(run: Path) -> int:
    from lifesearch_local.tasks import load_tasks

    tasks = {t.id: t for t in load_tasks(run / "tasks.jsonl")}
    return sum(sum(1 for r in tasks[rep.task_id].rubrics if r.weight > 0)
               for rep in read_records(run / "reports.jsonl", Report))


def check_complete(run: Path) -> list[Judgment]:
    js = read_records(run / "judgments.jsonl", Judgment)
    reports = read_records(run / "reports.jsonl", Report)
    assert len(reports) == len({r.key for r in reports})
    assert len(js) == len({j.key for j in js}) == expected_judgments(run)
    assert (run / "report.html").exists() and (run / "scores.json").exists()
    return js


def test_sigterm_to_the_driver_then_rerun(cluster, tmp_path):
    address, env, _ = cluster
    cfg = config(tmp_path, address)
    proc = start_run(cfg, env)
    wait_for_judgments(tmp_path / "run", proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert "stopped by signal" in out
    partial = read_records(tmp_path / "run" / "judgments.jsonl", Judgment)
    assert 0 < len(partial) < expected_judgments(tmp_path / "run")
    proc = start_run(cfg, env)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    check_complete(tmp_path / "run")


def test_a_worker_node_dies_mid_run(cluster, tmp_path):
    address, env, procs = cluster
    cfg = config(tmp_path, address)
    proc = start_run(cfg, env)
    wait_for_judgments(tmp_path / "run", proc, n=10)
    # The node and the replica on it are gone: its process group, and every descendant that left
    # the group (Ray's workers can), else the actor could serve on until Ray notices the node died.
    tree = descendants(procs["w1"].pid)
    os.killpg(procs["w1"].pid, signal.SIGKILL)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    check_complete(tmp_path / "run")
    import json

    judge = json.loads((tmp_path / "run" / "manifest.json").read_text())["stages"]["judge/tiny-llama-choice"]
    assert judge["ray_replicas"] == 2 and judge.get("replica_failures", 0) >= 1, (judge, err[-3000:])
