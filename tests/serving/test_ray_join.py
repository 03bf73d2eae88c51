"""Joining an existing Ray cluster: $RAY_ADDRESS wins over a local cluster's sizing, and `cluster
wait` (the batch scripts' gate) fails at once when the head is gone and stops at once on SIGTERM."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import types

import pytest

from serving.config import RayConfig
from serving.ray import session


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fake_ray(monkeypatch):
    """A `ray` module that records ray.init's arguments."""
    calls: list[dict] = []
    mod = types.SimpleNamespace(is_initialized=lambda: False, init=lambda **kw: calls.append(kw))
    monkeypatch.setitem(sys.modules, "ray", mod)
    return calls


def test_a_local_cluster_config_joins_ray_address_without_sizing_it(fake_ray, monkeypatch):
    # configs/cpu_small.yaml inside slurm/lifesearch.sbatch: RAY_ADDRESS is set, ray.num_cpus too
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:20300")
    cfg = RayConfig(num_cpus=2, num_gpus=0, object_store_memory_mb=256)
    assert session.cluster_address(cfg) == "10.0.0.1:20300"
    assert session.connect(cfg) is True
    (kw,) = fake_ray
    assert kw["address"] == "10.0.0.1:20300"
    assert not {"num_cpus", "num_gpus", "object_store_memory", "include_dashboard"} & kw.keys()


def test_without_ray_address_the_config_starts_its_own_cluster(fake_ray, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert session.cluster_address(RayConfig(num_cpus=2)) is None
    session.connect(RayConfig(num_cpus=2, object_store_memory_mb=256))
    (kw,) = fake_ray
    assert "address" not in kw and kw["num_cpus"] == 2 and kw["object_store_memory"] == 256 * 2**20
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:1")
    assert session.cluster_address(RayConfig(address="auto")) == "auto"  # the config's own address wins


def cluster_wait(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lifesearch_local", "cluster", "wait", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_cluster_wait_fails_at_once_when_the_heads_process_is_gone(tmp_path):
    with open(tmp_path / "head.log", "w") as log:
        head = subprocess.Popen([sys.executable, "-c", "print('ValueError: the head could not start')"], stdout=log)
        head.wait()
    t0 = time.monotonic()
    p = cluster_wait("--nodes", "1", "--timeout", "120", "--address", f"127.0.0.1:{free_port()}",
                     "--head-pid", str(head.pid), "--head-log", str(tmp_path / "head.log"), "--head-name", "the Ray head on n1")
    try:
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)
    assert p.returncode == 2 and time.monotonic() - t0 < 30
    assert err.strip().splitlines() == [
        f"error: the Ray head on n1 (pid {head.pid}) exited before the cluster came up: "
        f"ValueError: the head could not start; its log: {tmp_path / 'head.log'}"]


def test_cluster_wait_stops_at_once_on_sigterm():
    # nothing listens at the address: Ray's own connection attempts would block for minutes
    p = cluster_wait("--nodes", "1", "--timeout", "300", "--address", f"127.0.0.1:{free_port()}")
    time.sleep(4)  # past the imports, into the wait
    assert p.poll() is None
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=10)
    finally:
        if p.poll() is None:  # it ignored SIGTERM: don't leave it behind
            p.kill()
            p.wait(timeout=30)
    assert time.monotonic() - t0 < 3 and p.returncode == 143
