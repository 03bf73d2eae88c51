"""Ray sessions: a local cluster starts with token authentication set up explicitly, and
$RAY_ADDRESS wins over a local cluster's sizing."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest

from serving.config import RayConfig
from serving.ray import session

pytest.importorskip("ray")



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


SCRIPT = """
import ray
from serving.config import RayConfig
from serving.ray.session import connect
connect(RayConfig(num_cpus=1, object_store_memory_mb=100))
assert ray.get(ray.put(7)) == 7
ray.shutdown()
print("ok")
"""


def test_local_cluster_uses_a_token_without_rays_warning(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    env["HOME"] = str(tmp_path)  # Ray keeps its token in ~/.ray/auth_token
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr
    assert "Token authentication" not in r.stderr and "token-auth" not in r.stderr, r.stderr
    assert (tmp_path / ".ray" / "auth_token").read_text().strip()  # the token Ray created and uses


def test_a_users_own_auth_mode_is_respected(monkeypatch):
    from serving.ray.session import token_auth_for_local_cluster

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    token_auth_for_local_cluster()
    assert os.environ["RAY_AUTH_MODE"] == "disabled"
